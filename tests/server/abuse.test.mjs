// ml_server under abuse (docs/reliability.md): slow-loris connections, a thousand connections
// at once, bodies that lie about their length, JSON nested a million levels deep, a huge max_tokens, many
// stop strings, streams cancelled midway. Throughout, /health must answer within 1 s (2 s behind
// a thousand queued connections); every request that is allowed to finish must finish with its
// whole answer; and afterwards the
// server's resident memory must be back within 10% (plus 8 MiB of allocator slack) of what it
// was after a warm-up that ran every slot through a whole context (so that the KV caches'
// pages, allocated at start, have been touched: first use is not a leak). Bounded: each case
// stops its load after a few seconds.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import net from 'node:net';
import { readFileSync } from 'node:fs';
import { startServer } from './harness.mjs';

// Under the sanitizers (scripts/test_sanitizers.sh sets ASAN_OPTIONS, which the server
// inherits) every thread start and allocation costs several times more, so /health gets 3 s;
// and ASan keeps freed memory in quarantine, so the resident size cannot come back (leaks are
// LeakSanitizer's to find there, when the server exits).
const sanitized = Boolean(process.env.ASAN_OPTIONS);
const healthLimitMs = sanitized ? 3000 : 1000;

let srv;
let host;
let port;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

before(async () => {
  srv = await startServer(['--parallel', '4', '-t', '2', '--timeout', '60']);
  const u = new URL(srv.url);
  host = u.hostname;
  port = Number(u.port);
});
after(() => srv.stop());

const rssKiB = () => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${srv.proc.pid}/status`, 'utf8'))[1]);

async function complete(body = {}) {
  const r = await fetch(`${srv.url}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'The jury said', max_tokens: 8, temperature: 0, ...body }),
  });
  return { status: r.status, json: await r.json() };
}

// Runs work() while /health is asked every 250 ms, each answer due within limitMs; returns
// work's result.
async function healthyDuring(work, limitMs = healthLimitMs) {
  let stop = false;
  let slowest = 0;
  const failures = [];
  const poll = (async () => {
    while (!stop) {
      const t0 = Date.now();
      try {
        const r = await fetch(`${srv.url}/health`, { signal: AbortSignal.timeout(limitMs) });
        if (r.status !== 200) failures.push(`status ${r.status}`);
        await r.text();
      } catch (e) {
        failures.push(`${e.name} after ${Date.now() - t0} ms`);
      }
      slowest = Math.max(slowest, Date.now() - t0);
      await sleep(250);
    }
  })();
  try {
    return await work();
  } finally {
    stop = true;
    await poll;
    assert.deepEqual(failures, [], `/health failed during the load (slowest ${slowest} ms)`);
    assert.ok(slowest < limitMs, `/health took ${slowest} ms`);
  }
}

// A raw TCP connection: resolves with everything the server sent once it closes (or after ms).
function raw(write, ms = 8000) {
  return new Promise((resolve) => {
    const s = net.connect(port, host);
    let got = '';
    const done = () => {
      clearTimeout(timer);
      s.destroy();
      resolve(got);
    };
    const timer = setTimeout(done, ms);
    s.on('data', (d) => (got += d));
    s.on('close', done);
    s.on('error', done);
    s.on('connect', () => write(s));
  });
}

let baseline;
let reference;
// The completion's text is the warm-up's: the load changed nothing a request sees.
const sameText = (r) => assert.equal(r.json.choices[0].text, reference.json.choices[0].text);
async function answersAsBefore() {
  const r = await complete();
  assert.equal(r.status, 200);
  sameText(r);
}
test('warm-up: the answer every later request must still get', async () => {
  reference = await complete();
  assert.equal(reference.status, 200);
  for (let i = 0; i < 20; ++i) await complete({ max_tokens: 16, stop: ['x'] });
  // every slot to the end of its context (the random model rarely ends a text by itself)
  const full = await Promise.all([0, 1, 2, 3].map(() => complete({ max_tokens: 2 ** 31 - 1 })));
  for (const r of full) assert.equal(r.status, 200, JSON.stringify(r.json));
  await sleep(6000); // the connection threads of the warm-up end (5 s idle)
  baseline = rssKiB();
});

test('slow-loris: 64 connections trickling their headers do not starve the others', async () => {
  await healthyDuring(async () => {
    const loris = [];
    for (let i = 0; i < 64; ++i)
      loris.push(
        raw(async (s) => {
          const req = `POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n`;
          for (const ch of req) {
            if (s.destroyed) return;
            s.write(ch);
            await sleep(300);
          }
        }, 6000),
      );
    await sleep(1000);
    await answersAsBefore();
    await Promise.all(loris);
  });
});

// A probe on a fresh connection waits while the listener starts a thread for each of the
// thousand queued before it: ~0.75 s on an idle 2-core VM, over 1 s about half the time when
// another process holds a core (docs/reliability.md), so it gets twice the usual limit. The
// idle connections stay open 3 s: a probe starved by them would still fail.
test('a thousand connections opened at once', async () => {
  await healthyDuring(async () => {
    const socks = [];
    for (let i = 0; i < 1000; ++i) socks.push(raw(() => {}, 3000));
    await sleep(500);
    await answersAsBefore();
    await Promise.all(socks);
  }, 2 * healthLimitMs);
});

test('bodies that lie about Content-Length', async () => {
  await healthyDuring(async () => {
    const body = JSON.stringify({ prompt: 'hi', max_tokens: 1 });
    // longer than sent: the server waits for the rest, then gives up; never answers from half
    const short = await raw((s) => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length + 100}\r\n\r\n${body}`), 8000);
    assert.ok(!/"text_completion"/.test(short), short);
    // shorter than sent: the body is cut, so it is not JSON (400), and the rest is no request
    const long = await raw((s) => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 5\r\nConnection: close\r\n\r\n${body}`), 4000);
    assert.match(long, /^HTTP\/1\.1 400/);
    // absurd: more than --max-body; refused (413) or dropped, never read
    const huge = await raw((s) => s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{`), 4000);
    assert.ok(huge === '' || /^HTTP\/1\.1 413/.test(huge), huge);
  });
});

// A million levels (2 MB, under --max-body) once overflowed a connection thread's stack: JSON
// nested deeper than 512 levels is refused before it is parsed.
test('JSON nested a million levels deep is refused with 400', async () => {
  await healthyDuring(async () => {
    const deep = '['.repeat(1000000) + ']'.repeat(1000000);
    for (const body of [deep, `{"prompt": ${deep}}`, `{"messages": [{"role": "user", "content": ${deep}}]}`]) {
      const r = await fetch(`${srv.url}/v1/chat/completions`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      assert.equal(r.status, 400, await r.text());
    }
  });
});

test('huge max_tokens and many stop strings', async () => {
  await healthyDuring(async () => {
    const big = await complete({ max_tokens: 2 ** 31 - 1, stop: ['zzzz'] });
    assert.ok([200, 400].includes(big.status), JSON.stringify(big.json));
    if (big.status === 200) assert.equal(big.json.choices[0].finish_reason, 'length');
    const stops = Array.from({ length: 5000 }, (_, i) => `stop-${i}-${'x'.repeat(i % 50)}`);
    const many = await complete({ stop: stops });
    assert.ok([200, 400].includes(many.status), JSON.stringify(many.json));
    if (many.status === 200) sameText(many);
  });
});

test('streams cancelled midway leave the server answering and memory back', async () => {
  await healthyDuring(async () => {
    for (let round = 0; round < 5; ++round) {
      const streams = [];
      for (let i = 0; i < 8; ++i) {
        const ac = new AbortController();
        streams.push(
          fetch(`${srv.url}/v1/completions`, {
            method: 'POST',
            headers: { 'Content-Type': 'application/json' },
            body: JSON.stringify({ prompt: 'Once', max_tokens: 2000, stream: true }),
            signal: ac.signal,
          })
            .then(async (r) => {
              assert.equal(r.status, 200);
              const reader = r.body.getReader();
              await reader.read();
              ac.abort();
            })
            .catch(() => {}),
        );
      }
      await Promise.all(streams);
    }
    await answersAsBefore();
  });
  // the cancelled slots are free again: all four answer at once
  await Promise.all([0, 1, 2, 3].map(answersAsBefore));
  if (sanitized) return;
  // the connection threads end after 5 s idle
  let now = rssKiB();
  for (let i = 0; i < 40 && now > baseline * 1.1 + 8192; ++i) {
    await sleep(250);
    now = rssKiB();
  }
  console.log(`RSS ${now} KiB after the load, ${baseline} KiB before`);
  assert.ok(now <= baseline * 1.1 + 8192, `RSS ${now} KiB after the load, ${baseline} KiB before`);
});
