#!/usr/bin/env node
// Bounded loopback load test of ml_server (or any OpenAI-compatible server): N requests from C
// concurrent clients (half streamed, half whole, or all streamed with --stream all; chat and
// completions, or completions only), each checked for a complete, well-formed answer. Prints
// failures (must be 0), aggregate generated tokens/s, latency percentiles and, for the
// streamed ones, time to the first token and per-token latency; exits 1 on any failure.
// Node >= 18, no packages.
//
//   node scripts/load_test.mjs --server build/ml_server --model model.mlb [--requests 200]
//        [--concurrency 8] [--parallel 8] [--ctx 512] [--max-tokens 16]
//   node scripts/load_test.mjs --url http://127.0.0.1:8080 [--api-key KEY]
//        [--endpoints completions] [--stream all]
import { spawn } from 'node:child_process';
import { parseArgs } from 'node:util';

const { values: opt } = parseArgs({
  options: {
    url: { type: 'string' },
    server: { type: 'string' },
    model: { type: 'string' },
    'api-key': { type: 'string', default: process.env.KRAFLA_API_KEY ?? '' },
    requests: { type: 'string', default: '200' },
    concurrency: { type: 'string', default: '8' },
    'max-tokens': { type: 'string', default: '16' },
    threads: { type: 'string', default: '2' },
    parallel: { type: 'string', default: '' },
    ctx: { type: 'string', default: '512' },  // ml_server --ctx (per slot)  // ml_server --parallel (default: its own)
    // both, or completions only (llama-server's chat endpoint refuses a random model's
    // output: it parses the reply for the template's reasoning and tool markup)
    endpoints: { type: 'string', default: 'both' },
    stream: { type: 'string', default: 'half' },  // half of the requests streamed, or all
    'time-limit': { type: 'string', default: '240' },  // seconds for the whole run
  },
});
const N = Number(opt.requests);
const C = Number(opt.concurrency);
const MAX_TOKENS = Number(opt['max-tokens']);

function fail(msg) {
  console.error(`load_test: error: ${msg}`);
  process.exit(2);
}

// Starts ml_server on a free port when --server is given; resolves to its base URL.
function startServer() {
  if (!opt.model) fail('--server needs --model FILE.mlb');
  const args = ['-m', opt.model, '--port', '0', '-t', opt.threads, '--ctx', opt.ctx, '-q'];
  if (opt.parallel) args.push('--parallel', opt.parallel);
  const proc = spawn(opt.server, args,
    { stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  return new Promise((resolve, reject) => {
    proc.stderr.on('data', (d) => {
      log += d;
      const m = /on (http:\/\/\S+)/.exec(log);
      if (m) resolve({ url: m[1], proc });
    });
    proc.on('exit', (code) => reject(new Error(`ml_server exited with ${code}:\n${log}`)));
  });
}

function requestFor(i) {
  const stream = opt.stream === 'all' || i % 2 === 1;
  const body = { max_tokens: MAX_TOKENS, temperature: 0.7, top_k: 40, seed: i, stream };
  if (stream) body.stream_options = { include_usage: true };  // tokens for the throughput
  // Every fourth request repeats the previous conversation's opening, so some prompts reuse
  // the KV cache and some do not.
  if (i % 4 < 2 && opt.endpoints !== 'completions') {
    body.messages = [{ role: 'system', content: 'You answer briefly.' },
                     { role: 'user', content: `Question ${Math.floor(i / 4)}: what is a fjord?` }];
    return { path: '/v1/chat/completions', body, stream };
  }
  body.prompt = `Request ${i}: the weather in Reykjavik is`;
  return { path: '/v1/completions', body, stream };
}

// One request; throws with the reason if the answer is not complete and well formed. Returns
// the completion tokens and, streamed, the times (ms from the request) of the first and last
// content events.
async function runOne(base, i) {
  const { path, body, stream } = requestFor(i);
  const headers = { 'Content-Type': 'application/json' };
  if (opt['api-key']) headers.Authorization = `Bearer ${opt['api-key']}`;
  const t0 = performance.now();
  const r = await fetch(base + path, { method: 'POST', headers, body: JSON.stringify(body) });
  let text = '';
  let first = NaN;
  let last = NaN;
  const decoder = new TextDecoder();
  for await (const piece of r.body) {
    const chunk = decoder.decode(piece, { stream: true });
    text += chunk;
    // each SSE event arrives in one piece: look at the new one only, not the whole reply again
    if (stream && /"(content|text)":"[^"]/.test(chunk)) {
      if (Number.isNaN(first)) first = performance.now() - t0;
      last = performance.now() - t0;
    }
  }
  if (r.status !== 200) throw new Error(`HTTP ${r.status}: ${text.slice(0, 200)}`);
  if (!stream) {
    const j = JSON.parse(text);
    if (!j.choices?.[0]?.finish_reason || !j.usage) throw new Error('incomplete response');
    return { tokens: j.usage.completion_tokens };
  }
  const events = text.split('\n\n');
  if (events.pop() !== '' || events.at(-1) !== 'data: [DONE]') throw new Error('stream without [DONE]');
  const chunks = events.slice(0, -1).map((e) => {
    if (!e.startsWith('data: ')) throw new Error(`bad SSE event: ${e.slice(0, 80)}`);
    return JSON.parse(e.slice(6));
  });
  if (chunks.some((c) => c.error)) throw new Error(`error event: ${JSON.stringify(chunks.find((c) => c.error))}`);
  if (!chunks.some((c) => c.choices?.[0]?.finish_reason)) throw new Error('stream without finish_reason');
  const usage = chunks.at(-1)?.usage;
  if (!usage) throw new Error('stream without its usage chunk (stream_options.include_usage)');
  return { tokens: usage.completion_tokens, first, last };
}

function percentile(sorted, p) {
  if (!sorted.length) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

async function main() {
  let server = null;
  let base = opt.url;
  if (!base) {
    if (!opt.server) fail('give --url URL or --server ml_server --model FILE.mlb');
    server = await startServer();
    base = server.url;
  }
  const deadline = setTimeout(() => {
    console.error(`load_test: error: not finished within ${opt['time-limit']} s`);
    server?.proc.kill('SIGTERM');
    process.exit(1);
  }, Number(opt['time-limit']) * 1000);
  const latencies = [];
  const ttfts = [];  // streamed: ms to the first content event
  const perToken = [];  // streamed: ms between content events after the first, per token
  let tokens = 0;
  const failures = [];
  let next = 0;
  const t0 = performance.now();
  async function client() {
    while (next < N) {
      const i = next++;
      const t = performance.now();
      try {
        const res = await runOne(base, i);
        latencies.push(performance.now() - t);
        tokens += res.tokens;
        if (!Number.isNaN(res.first ?? NaN)) {
          ttfts.push(res.first);
          if (res.tokens > 1) perToken.push((res.last - res.first) / (res.tokens - 1));
        }
      } catch (e) {
        failures.push(`#${i}: ${e.message}`);
      }
    }
  }
  await Promise.all(Array.from({ length: C }, client));
  const wall = (performance.now() - t0) / 1000;
  clearTimeout(deadline);
  if (server) {
    server.proc.removeAllListeners('exit');
    const exited = new Promise((r) => server.proc.on('exit', (c) => r(c)));
    server.proc.kill('SIGTERM');
    const code = await exited;
    if (code !== 0) failures.push(`ml_server exited with ${code} after SIGTERM`);
  }
  for (const a of [latencies, ttfts, perToken]) a.sort((x, y) => x - y);
  const ms = (a, p) => percentile(a, p).toFixed(1);
  console.log(`load_test: ${N} requests, ${C} concurrent clients, max_tokens ${MAX_TOKENS}: ` +
    `${failures.length} failures; ${wall.toFixed(2)} s (${(N / wall).toFixed(1)} req/s, ` +
    `${(tokens / wall).toFixed(1)} generated tokens/s); latency ms p50 ${ms(latencies, 50)} ` +
    `p90 ${ms(latencies, 90)} p99 ${ms(latencies, 99)} max ${ms(latencies, 100)}; streamed: ` +
    `first token ms p50 ${ms(ttfts, 50)} p99 ${ms(ttfts, 99)}, per token ms ` +
    `p50 ${ms(perToken, 50)} p99 ${ms(perToken, 99)}`);
  for (const f of failures.slice(0, 10)) console.log(`  ${f}`);
  process.exit(failures.length ? 1 : 0);
}

main().catch((e) => fail(e.message));
