// The sampling flags of ml_server (--temp, --top-k, --seed, …) are the defaults of fields a
// request leaves out; a request's own value wins. Compared through replies: the tiny random
// model's distribution is flat, so a sampled reply differs from the greedy one and from a
// reply with another seed, and equal settings give equal replies (sampling is deterministic
// for a given seed, whatever the thread count).
import assert from 'node:assert/strict';
import { test } from 'node:test';

import { startServer } from './harness.mjs';

// Few tokens: sampling from the whole 128k vocabulary is slow-ish on the tiny model.
const TOKENS = 8;

async function complete(srv, params) {
  const r = await fetch(`${srv.url}/v1/completions`, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify({ prompt: 'Geysers erupt because', max_tokens: TOKENS, ...params }),
  });
  const j = await r.json();
  assert.equal(r.status, 200, JSON.stringify(j));
  return j.choices[0].text;
}

test('without flags the defaults are OpenAI\'s', async () => {
  const srv = await startServer(['-t', '2']);
  try {
    assert.match(srv.log(), /sampling defaults: temperature 1 top_k 0 top_p 1 min_p 0 repeat_penalty 1 repeat_last_n 64 seed random/);
  } finally {
    await srv.stop();
  }
});

test('--temp 0 and --seed: defaults for requests that leave them out; request values win', async () => {
  const srv = await startServer(['-t', '2', '--temp', '0', '--seed', '11', '-c', '256', '-b', '16']);
  try {
    assert.match(srv.log(), /4 slots of 256 tokens/);  // -c
    assert.match(srv.log(), /temperature 0 .* seed 11\n/);
    const greedy = await complete(srv, { temperature: 0 });
    assert.equal(await complete(srv, {}), greedy, '--temp 0 must make requests greedy');
    const hot = await complete(srv, { temperature: 1.5 });
    assert.notEqual(hot, greedy, 'a request temperature must win over --temp');
    assert.equal(await complete(srv, { temperature: 1.5 }), hot, '--seed must repeat the reply');
    assert.equal(await complete(srv, { temperature: 1.5, seed: 11 }), hot);
    assert.notEqual(await complete(srv, { temperature: 1.5, seed: 12 }), hot,
      'a request seed must win over --seed');
    // -c: the context is 256 tokens.
    const r = await fetch(`${srv.url}/v1/completions`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ prompt: 'lava '.repeat(300) }),
    });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, 'context_length_exceeded');
  } finally {
    await srv.stop();
  }
});

test('--top-k 1 makes sampling at any temperature greedy unless the request sets top_k', async () => {
  const srv = await startServer(['-t', '2', '--top-k', '1', '--temp', '1.5', '--seed', '3']);
  try {
    const greedy = await complete(srv, { temperature: 0 });
    assert.equal(await complete(srv, {}), greedy);
    assert.notEqual(await complete(srv, { top_k: 0 }), greedy);
  } finally {
    await srv.stop();
  }
});
