// Raw HTTP checks of ml_server (what curl sees): SSE framing byte by byte, error objects for
// requests the SDK would never send, CORS, disconnects, shutdown and command-line errors.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { runServer, startServer, waitFor } from './harness.mjs';

const ORIGIN = 'http://app.example';
const MAX_BODY = 65536;
let srv;

before(async () => {
  srv = await startServer(['--ctx', '256', '-t', '2', '--cors', ORIGIN, '--max-body', String(MAX_BODY)]);
});

after(async () => {
  await srv.stop();
});

function post(path, body, headers = {}, signal = undefined) {
  return fetch(`${srv.url}${path}`, {
    method: 'POST',
    signal,
    headers: { 'Content-Type': 'application/json', ...headers },
    body: typeof body === 'string' ? body : JSON.stringify(body),
  });
}

function assertErrorObject(j) {
  assert.deepEqual(Object.keys(j), ['error']);
  assert.deepEqual(Object.keys(j.error).sort(), ['code', 'message', 'param', 'type']);
  assert.equal(typeof j.error.message, 'string');
  assert.equal(typeof j.error.type, 'string');
}

// Splits an SSE body into its events, as bytes, so that each is checked as UTF-8 on its own.
function sseEvents(bytes) {
  const events = [];
  let start = 0;
  for (let i = 0; i + 1 < bytes.length; i++) {
    if (bytes[i] === 10 && bytes[i + 1] === 10) {
      events.push(bytes.subarray(start, i));
      start = i + 2;
      i++;
    }
  }
  assert.equal(start, bytes.length, 'the stream must end with a complete event');
  return events;
}

const messages = [{ role: 'user', content: 'Write about glaciers. ÞÆÖ — 氷河 🧊' }];

// Reads the rest of a streamed body (after what `reader` already returned) as SSE event texts.
async function readEvents(reader, first = new Uint8Array()) {
  const parts = [first];
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
  }
  const bytes = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
  let at = 0;
  for (const p of parts) { bytes.set(p, at); at += p.length; }
  return sseEvents(bytes).map((e) => new TextDecoder().decode(e));
}

test('GET / describes the server', async () => {
  const r = await fetch(`${srv.url}/`);
  assert.equal(r.status, 200);
  const j = await r.json();
  assert.equal(j.name, 'ml_server');
  assert.equal(j.model, srv.model);
  assert.match(j.version, /^\d+\.\d+/);
  assert.ok(j.endpoints.includes('POST /v1/chat/completions'), JSON.stringify(j));
});

test('GET /models/{id} without /v1: the model, or 404 model_not_found', async () => {
  const ok = await fetch(`${srv.url}/models/${encodeURIComponent(srv.model)}`);
  assert.equal(ok.status, 200);
  assert.deepEqual(Object.keys(await ok.json()).sort(), ['created', 'id', 'object', 'owned_by']);
  const r = await fetch(`${srv.url}/models/org%2Fother-model`);
  assert.equal(r.status, 404);
  const j = await r.json();
  assertErrorObject(j);
  assert.equal(j.error.code, 'model_not_found');
});

test('unknown and unimplemented fields are refused by name; metadata is accepted', async () => {
  const cases = [
    [{ min_p: 'abc' }, 'min_p', 'invalid_type'],
    [{ min_p: 2 }, 'min_p', 'invalid_value'],
    [{ mirostat: 2 }, 'mirostat', 'unsupported_parameter'],
    [{ grammar: 'root ::= "a"' }, 'grammar', 'unsupported_parameter'],
    [{ logprobs: 6 }, 'logprobs', 'invalid_value'],
    [{ logit_bias: { 5: 1 } }, 'logit_bias', 'unsupported_parameter'],
  ];
  for (const [extra, param, code] of cases) {
    const r = await post('/v1/completions', { prompt: 'a', max_tokens: 1, ...extra });
    assert.equal(r.status, 400, JSON.stringify(extra));
    const j = await r.json();
    assertErrorObject(j);
    assert.equal(j.error.param, param);
    assert.equal(j.error.code, code);
  }
  const ok = await post('/v1/completions', {
    prompt: 'a', max_tokens: 1, min_p: 0.05, user: 'u', metadata: { k: 'v' }, store: false, n: 1,
  });
  assert.equal(ok.status, 200, await ok.clone().text());
});

test('the log names the status and the reason of every error response', async () => {
  await post('/v1/chat/completions', { messages, mirostat: 2 });
  await fetch(`${srv.url}/v1/no-such-thing`);
  await post('/v1/completions', 'x'.repeat(MAX_BODY + 10));
  const lines = () => srv.log().split('\n');
  const expected = [
    /^ml_server: POST \/v1\/chat\/completions -> 400: Unrecognized request argument supplied: 'mirostat'/,
    /^ml_server: GET \/v1\/no-such-thing -> 404: Unknown request URL: GET \/v1\/no-such-thing\.$/,
    /^ml_server: POST \/v1\/completions -> 413: The request body is larger than 65536 bytes/,
  ];
  for (const re of expected)
    assert.ok(await waitFor(() => lines().some((l) => re.test(l))), `no line ${re} in:\n${srv.log()}`);
});

test('GET /health', async () => {
  const r = await fetch(`${srv.url}/health`);
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { status: 'ok' });
});

test('SSE framing: data: lines, role first, valid UTF-8 per event, [DONE] last', async () => {
  const r = await post('/v1/chat/completions', {
    messages, max_tokens: 48, temperature: 0, stream: true, stream_options: { include_usage: true },
  });
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/event-stream/);
  const events = sseEvents(new Uint8Array(await r.arrayBuffer()));
  const strict = new TextDecoder('utf-8', { fatal: true });
  const texts = events.map((e) => strict.decode(e));  // throws on a split character
  for (const t of texts) assert.match(t, /^data: /);
  assert.equal(texts.at(-1), 'data: [DONE]');
  const chunks = texts.slice(0, -1).map((t) => JSON.parse(t.slice(6)));
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  for (const c of chunks.slice(0, -1)) {
    assert.equal(c.object, 'chat.completion.chunk');
    assert.equal(c.usage, null);
    assert.equal(c.choices.length, 1);
  }
  const usage = chunks.at(-1);
  assert.deepEqual(usage.choices, []);
  assert.ok(usage.usage.prompt_tokens > 0);
  const fin = chunks.at(-2).choices[0];
  assert.ok(['stop', 'length'].includes(fin.finish_reason));
  assert.deepEqual(fin.delta, {});
});

test('SSE without include_usage has no usage chunk', async () => {
  const r = await post('/v1/completions', { prompt: 'Ice', max_tokens: 5, temperature: 0, stream: true });
  const texts = sseEvents(new Uint8Array(await r.arrayBuffer())).map((e) => new TextDecoder().decode(e));
  assert.equal(texts.at(-1), 'data: [DONE]');
  const chunks = texts.slice(0, -1).map((t) => JSON.parse(t.slice(6)));
  for (const c of chunks) {
    assert.equal(c.object, 'text_completion');
    assert.ok(!('usage' in c));
    assert.equal(c.choices.length, 1);
  }
  assert.equal(chunks.at(-1).choices[0].finish_reason, 'length');
});

test('malformed JSON → 400 error object', async () => {
  for (const body of ['{"messages": [', 'not json', '[1, 2]', '']) {
    const r = await post('/v1/chat/completions', body);
    assert.equal(r.status, 400, body);
    const j = await r.json();
    assertErrorObject(j);
    assert.equal(j.error.type, 'invalid_request_error');
  }
});

test('missing messages / prompt → 400', async () => {
  let r = await post('/v1/chat/completions', { model: srv.model });
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.param, 'messages');
  r = await post('/v1/completions', {});
  assert.equal(r.status, 400);
  assert.equal((await r.json()).error.param, 'prompt');
});

test('body over --max-body → 413 error object, then the server keeps serving', async () => {
  const big = JSON.stringify({ messages: [{ role: 'user', content: 'x'.repeat(MAX_BODY * 2) }] });
  const r = await post('/v1/chat/completions', big);
  assert.equal(r.status, 413);
  const j = await r.json();
  assertErrorObject(j);
  assert.equal(j.error.code, 'request_too_large');
  const ok = await fetch(`${srv.url}/health`);
  assert.equal(ok.status, 200);
});

test('unknown URL → 404 error object', async () => {
  const r = await fetch(`${srv.url}/v1/engines`);
  assert.equal(r.status, 404);
  assertErrorObject(await r.json());
});

test('CORS: preflight and Access-Control-Allow-Origin', async () => {
  const pre = await fetch(`${srv.url}/v1/chat/completions`, {
    method: 'OPTIONS',
    headers: { Origin: ORIGIN, 'Access-Control-Request-Method': 'POST',
               'Access-Control-Request-Headers': 'authorization, content-type' },
  });
  assert.ok(pre.status === 204 || pre.status === 200);
  assert.equal(pre.headers.get('access-control-allow-origin'), ORIGIN);
  assert.match(pre.headers.get('access-control-allow-methods'), /POST/);
  assert.match(pre.headers.get('access-control-allow-headers'), /authorization/i);
  const r = await post('/v1/completions', { prompt: 'a', max_tokens: 1 }, { Origin: ORIGIN });
  assert.equal(r.status, 200);
  assert.equal(r.headers.get('access-control-allow-origin'), ORIGIN);
});

test('a client that disconnects mid-stream stops generation', async () => {
  const ac = new AbortController();
  const r = await post('/v1/completions',
    { prompt: 'Tell a long story', max_tokens: 200, temperature: 0, stream: true },
    {}, ac.signal);
  const reader = r.body.getReader();
  await reader.read();
  ac.abort();
  await reader.cancel().catch(() => {});
  assert.ok(await waitFor(() => /\d+ generated, cancelled/.test(srv.log()), 5000),
    `no cancelled generation in the log:\n${srv.log()}`);
  const generated = Number(/(\d+) generated, cancelled/.exec(srv.log())[1]);
  assert.ok(generated < 200, `generated ${generated} tokens for a client that left`);
  const ok = await post('/v1/completions', { prompt: 'a', max_tokens: 2 });
  assert.equal(ok.status, 200);
});

// The running stream and one queued behind it must both end with an error event and [DONE]:
// without them a client cannot tell a cut reply from a finished one.
test('SIGTERM mid-stream: exit 0, each open stream ends with an error event, then [DONE]', async () => {
  const s = await startServer(['--ctx', '2048', '-t', '1']);
  const open = (prompt) => fetch(`${s.url}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt, max_tokens: 2000, temperature: 0, stream: true }),
  });
  const running = (await open('Tell a long story')).body.getReader();
  const first = await running.read();  // generating now
  const queued = (await open('Another long story')).body.getReader();
  const { code, signal } = await s.stop('SIGTERM');
  assert.equal(signal, null);
  assert.equal(code, 0, s.log());
  assert.match(s.log(), /stopped/);
  for (const events of [await readEvents(running, first.value), await readEvents(queued)]) {
    assert.ok(events.length >= 2, events.join('\n'));
    assert.equal(events.at(-1), 'data: [DONE]');
    const last = JSON.parse(events.at(-2).slice('data: '.length));
    assertErrorObject(last);
    assert.equal(last.error.type, 'server_error');
    assert.match(last.error.message, /shutting down/);
    for (const e of events.slice(0, -2)) assert.ok(!e.includes('finish_reason":"'), e);
  }
  assert.match(s.log(), /POST \/v1\/completions \(stream\) -> 503: The server is shutting down; the reply was cut after \d+ tokens/);
});

test('KRAFLA_API_KEY sets the key; SIGINT shuts the server down cleanly', async () => {
  const s = await startServer(['-t', '1'], { env: { KRAFLA_API_KEY: 'from-env' } });
  assert.equal((await fetch(`${s.url}/v1/models`)).status, 401);
  const ok = await fetch(`${s.url}/v1/models`, { headers: { Authorization: 'Bearer from-env' } });
  assert.equal(ok.status, 200);
  const { code } = await s.stop('SIGINT');
  assert.equal(code, 0, s.log());
});

test('bad arguments and bad model files exit 2 with one line', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'krafla-srv-'));
  const junk = join(dir, 'junk.mlb');
  writeFileSync(junk, 'this is not a model');
  const cases = [
    ['-m', junk],
    ['-m', join(dir, 'missing.mlb')],
    ['-m', process.env.ML_MODEL, '--port', 'eighty'],
    ['-m', process.env.ML_MODEL, '--chat', 'no-such-template'],
    ['--port', '8080'],
    ['-m', process.env.ML_MODEL, '--temp', 'nan'],
    ['-m', process.env.ML_MODEL, '--min-p', '2'],
    ['-m', process.env.ML_MODEL, '--top-k', '-1'],
    ['-m', process.env.ML_MODEL, '--seed', 'abc'],
    ['-m', process.env.ML_MODEL, '-c', '-5'],
    ['-m', process.env.ML_MODEL, '-b', '0'],
  ];
  for (const args of cases) {
    const { code, err } = await runServer(args);
    assert.equal(code, 2, `${args.join(' ')}: ${err}`);
    assert.match(err, /^ml_server: error: [^\n]+\n$/, err);
  }
});

test('--version prints one line and exits 0', async () => {
  const { code, out, err } = await runServer(['--version']);
  assert.equal(code, 0, err);
  assert.match(out, /^ml_server \d+\.\d+\S* \(commit [^;]+; ISA [^;]+; [^)]+\)\n$/, out);
});

// Two listeners on one port would split connections between them, so requests meant for the
// server with --api-key could reach one without (SO_REUSEPORT). The second must fail instead.
test('a second server on a port in use exits 2; the first keeps serving alone', async () => {
  const KEY = 'sk-first';
  const first = await startServer(['-t', '1', '--api-key', KEY]);
  try {
    const { hostname, port } = new URL(first.url);
    const { code, err } = await runServer(['-m', process.env.ML_MODEL, '--port', port, '-t', '1']);
    assert.equal(code, 2, err);
    assert.match(err, /^ml_server: error: [^\n]+\n$/, err);
    assert.ok(err.includes(`${hostname}:${port}`), err);
    for (let i = 0; i < 8; i++) {  // every connection reaches the first: none is let in without the key
      assert.equal((await fetch(`${first.url}/v1/models`)).status, 401);
      const ok = await fetch(`${first.url}/v1/models`, { headers: { Authorization: `Bearer ${KEY}` } });
      assert.equal(ok.status, 200);
    }
  } finally {
    await first.stop();
  }
});
