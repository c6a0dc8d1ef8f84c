// Parallel slots (--parallel) driven by the official OpenAI SDK: requests decoded together in
// one batch answer exactly as the same requests sent one at a time (sampled with seeds, so a
// single differing logit would change the text), on an attention model, on one with
// linear-attention (DeltaNet) layers and on a Mixture-of-Experts one; a client that disconnects
// frees its slot at once.
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { MODEL, startServer, waitFor } from './harness.mjs';

const LINEAR = process.env.ML_MODEL_LINEAR;

// Eight different requests: chat and completions, streamed and whole, prompts of different
// lengths (one longer than --batch, so prompt chunks share steps with decoding slots).
function requests(model) {
  const out = [];
  for (let i = 0; i < 8; i++) {
    const common = { model, max_tokens: 6 + 3 * i, temperature: 0.9, top_k: 40, seed: 100 + i };
    const words = Array.from({ length: 1 + ((i * 37) % 60) }, (_, k) => `w${(k * 13 + i) % 97}`);
    if (i % 2 === 0)
      out.push({ kind: 'chat', stream: i % 4 === 0, params: { ...common, messages: [{ role: 'user', content: `${i}: ${words.join(' ')}` }] } });
    else out.push({ kind: 'text', stream: i % 4 === 1, params: { ...common, prompt: `Text ${i}: ${words.join(' ')}` } });
  }
  return out;
}

async function run(client, { kind, stream, params }) {
  const api = kind === 'chat' ? client.chat.completions : client.completions;
  if (!stream) {
    const r = await api.create(params);
    const c = r.choices[0];
    return { text: kind === 'chat' ? c.message.content : c.text, finish: c.finish_reason, tokens: r.usage.completion_tokens };
  }
  const s = await api.create({ ...params, stream: true, stream_options: { include_usage: true } });
  let text = '';
  let finish = null;
  let tokens = null;
  for await (const ch of s) {
    if (ch.usage) tokens = ch.usage.completion_tokens;
    const c = ch.choices[0];
    if (!c) continue;
    text += (kind === 'chat' ? c.delta?.content : c.text) ?? '';
    if (c.finish_reason) finish = c.finish_reason;
  }
  return { text, finish, tokens };
}

const MOE = process.env.ML_MODEL_MOE;

// The Mixture-of-Experts model: the slots' rows route to different experts in one batch.
for (const [name, model] of [['attention model', MODEL], ['linear-attention model', LINEAR], ['MoE model', MOE]]) {
  const skip = !model || !existsSync(model) ? `no model file (${model})` : false;
  describe(name, { skip }, () => {
    let srv;
    let client;
    before(async () => {
      srv = await startServer(['--parallel', '4', '--batch', '16', '--ctx', '256', '-t', '2'], { model });
      client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
    });
    after(async () => {
      const { code } = await srv.stop();
      assert.equal(code, 0, `ml_server exit code after SIGTERM\n${srv.log()}`);
    });

    test('requests decoded together answer as the same requests one at a time', async () => {
      const reqs = requests(srv.model);
      const alone = [];
      for (const r of reqs) alone.push(await run(client, r));
      const together = await Promise.all(reqs.map((r) => run(client, r)));
      for (let i = 0; i < reqs.length; i++) {
        assert.ok(alone[i].tokens > 0, `request ${i} generated nothing`);
        assert.deepEqual(together[i], alone[i], `request ${i} (${reqs[i].kind}, stream ${reqs[i].stream})`);
      }
      // GET /metrics (Prometheus text) counts what the clients saw.
      const text = await (await fetch(`${srv.url}/metrics`)).text();
      const value = (name) => {
        const m = new RegExp(`^krafla_${name}\\{model="${srv.model}"\\} (\\S+)$`, 'm').exec(text);
        assert.ok(m, `no krafla_${name} in /metrics:\n${text}`);
        assert.match(text, new RegExp(`^# TYPE krafla_${name} (counter|gauge)$`, 'm'));
        return Number(m[1]);
      };
      const sum = (rs) => rs.reduce((a, r) => a + r.tokens, 0);
      assert.equal(value('requests_total'), 2 * reqs.length);
      assert.equal(value('generated_tokens_total'), sum(alone) + sum(together));
      assert.equal(value('slots'), 4);
      assert.equal(value('slots_busy'), 0);
      assert.equal(value('requests_queued'), 0);
      assert.ok(value('decode_tokens_per_second') > 0);
      assert.ok(value('prefill_tokens_per_second') > 0);
      // More requests than slots were in flight: the log shows some waited for a slot.
      assert.match(srv.log(), /\(\+0\.0[0-9]* s queued\)/);
      assert.match(srv.log(), /\(\+0\.[0-9]*[1-9][0-9]* s queued\)/);
    });
  });
}

describe('disconnects', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--parallel', '1', '--ctx', '2048', '-t', '2']);
  });
  after(async () => {
    await srv.stop();
  });

  test('a client that hangs up on a whole (non-streamed) request ends its generation', async () => {
    const ac = new AbortController();
    const body = { prompt: 'Once upon a time', max_tokens: 2000, temperature: 0 };
    const pending = fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body), signal: ac.signal,
    }).catch(() => 'aborted');
    await new Promise((r) => setTimeout(r, 150));
    ac.abort();
    assert.equal(await pending, 'aborted');
    assert.ok(await waitFor(() => /\d+ generated, cancelled/.test(srv.log()), 5000),
      `no cancelled generation in the log:\n${srv.log()}`);
    const generated = Number(/(\d+) generated, cancelled/.exec(srv.log())[1]);
    assert.ok(generated < 2000, `generated ${generated} tokens for a client that had left`);
    // The only slot is free again: the next request is served at once.
    const r = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'Hi', max_tokens: 2, temperature: 0 }),
    });
    assert.equal(r.status, 200);
  });
});

describe('--timeout', () => {
  let srv;
  before(async () => {
    srv = await startServer(['--parallel', '1', '--ctx', '2048', '-t', '2', '--timeout', '0.4']);
  });
  after(async () => {
    await srv.stop();
  });

  test('a request that runs out of time ends as length, and the next one is served', async () => {
    const post = (body) => fetch(`${srv.url}/v1/completions`, {
      method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body),
    });
    const t0 = Date.now();
    const r = await post({ prompt: 'Once upon a time', max_tokens: 2000, temperature: 0 });
    assert.ok(Date.now() - t0 < 2000, `took ${Date.now() - t0} ms`);
    assert.equal(r.status, 200);
    const j = await r.json();
    assert.equal(j.choices[0].finish_reason, 'length');
    assert.ok(j.usage.completion_tokens < 2000, `${j.usage.completion_tokens} tokens`);
    assert.match(srv.log(), /generated, timeout/);
    assert.equal((await post({ prompt: 'Hi', max_tokens: 2, temperature: 0 })).status, 200);
  });
});
