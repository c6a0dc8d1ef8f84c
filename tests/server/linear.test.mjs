// KV reuse on a model with linear-attention (Gated DeltaNet) layers, driven by the official SDK:
// the recurrent state cannot be cut back, so a request reuses the cache only when its prompt
// continues the whole cached history; a prompt that diverges is recomputed from scratch and
// answers exactly as it would on a fresh server (greedy decoding).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';

import { startServer } from './harness.mjs';

const MODEL = process.env.ML_MODEL_LINEAR;
const skip = !MODEL || !existsSync(MODEL) ? `no linear-attention model (ML_MODEL_LINEAR=${MODEL})` : false;
let srv;
let client;

before(async () => {
  if (skip) return;
  srv = await startServer(['--ctx', '256', '-t', '2'], { model: MODEL });
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 30000 });
});

after(async () => {
  if (skip) return;
  const { code } = await srv.stop();
  assert.equal(code, 0, `ml_server exit code after SIGTERM\n${srv.log()}`);
});

const ids = (n, salt) => Array.from({ length: n }, (_, i) => (i * 7919 + salt * 104729 + 13) % 3000);

async function complete(prompt, max_tokens) {
  return client.completions.create({ model: srv.model, prompt, max_tokens, temperature: 0, seed: 1 });
}

test('a prompt continuing the whole history reuses it; a diverging one is recomputed', { skip }, async () => {
  const p = ids(40, 1);
  const r1 = await complete(p, 0);               // nothing generated: the cache holds exactly p
  assert.equal(r1.usage.prompt_tokens_details.cached_tokens, 0);
  const longer = [...p, ...ids(12, 2)];
  const r2 = await complete(longer, 6);
  assert.equal(r2.usage.prompt_tokens_details.cached_tokens, 40);
  // Shares 20 tokens with the cache, then diverges: an attention-only model would keep 20.
  const other = [...p.slice(0, 20), ...ids(10, 3)];
  const r3 = await complete(other, 6);
  assert.equal(r3.usage.prompt_tokens_details.cached_tokens, 0);
  // `longer` again: the cache now holds `other` + its reply, so this recomputes from scratch,
  // and must give exactly the answer it gave when it continued the cache.
  const r4 = await complete(longer, 6);
  assert.equal(r4.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(r4.choices[0].text, r2.choices[0].text);
  // The same prompt twice has no new token to refresh the state with: recomputed too.
  const r5 = await complete(longer, 6);
  assert.equal(r5.usage.prompt_tokens_details.cached_tokens, 0);
  assert.equal(r5.choices[0].text, r2.choices[0].text);
});
