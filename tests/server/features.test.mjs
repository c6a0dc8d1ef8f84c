// The OpenAI features beyond plain text, driven by the unmodified official SDK: log
// probabilities, several choices (n), JSON output held to a schema by constrained decoding, and
// tool calls (a required call on a Qwen3-template model, then the round trip with the result).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, test } from 'node:test';
import OpenAI from 'openai';

import { MODEL, startServer } from './harness.mjs';

const QWEN = process.env.ML_MODEL_QWEN;
const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

// A server for one describe block: started before its tests, stopped (exit code 0) after.
function withServer(args, opts = {}) {
  const s = {};
  before(async () => {
    s.srv = await startServer(args, opts);
    s.client = new OpenAI({ baseURL: `${s.srv.url}/v1`, apiKey: 'unused', maxRetries: 0, timeout: 60000 });
  });
  after(async () => {
    const { code } = await s.srv.stop();
    assert.equal(code, 0, s.srv.log());
  });
  return s;
}

async function collect(stream) {
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  return chunks;
}

describe('logprobs, n and JSON output', () => {
  const s = withServer(['--ctx', '1024', '-t', '2', '--parallel', '4']);
  const messages = [{ role: 'user', content: 'Tell me about lava.' }];

  test('chat logprobs: one entry per token, the greedy token is the most likely, streamed equals whole', async () => {
    const params = { model: s.srv.model, messages, max_tokens: 8, temperature: 0, logprobs: true, top_logprobs: 5 };
    const r = await s.client.chat.completions.create(params);
    const lp = r.choices[0].logprobs.content;
    assert.equal(lp.length, r.usage.completion_tokens);
    // The content leaves special tokens out; their logprobs are listed all the same.
    const shown = lp.filter((t) => !/^<\|[a-z_0-9]+\|>$/.test(t.token));
    assert.equal(Buffer.from(shown.flatMap((t) => t.bytes)).toString('utf8'), r.choices[0].message.content);
    for (const t of lp) {
      assert.ok(t.logprob <= 0);
      assert.equal(t.top_logprobs.length, 5);
      assert.equal(t.top_logprobs[0].token, t.token);  // greedy: the argmax was sampled
      assert.equal(t.top_logprobs[0].logprob, t.logprob);
      for (let i = 1; i < 5; i++) assert.ok(t.top_logprobs[i].logprob <= t.top_logprobs[i - 1].logprob);
      const mass = t.top_logprobs.reduce((a, x) => a + Math.exp(x.logprob), 0);
      assert.ok(mass <= 1 + 1e-5, `top-5 probability mass ${mass}`);
    }
    const chunks = await collect(await s.client.chat.completions.create({ ...params, stream: true }));
    const streamed = chunks.flatMap((c) => c.choices[0]?.logprobs?.content ?? []);
    assert.deepEqual(streamed, lp);
  });

  test('sampled tokens (top_k 20): each is listed among the 20 alternatives with its own logprob', async () => {
    const r = await s.client.chat.completions.create({
      model: s.srv.model, messages, max_tokens: 12, temperature: 1.5, top_k: 20, seed: 9, logprobs: true, top_logprobs: 20,
    });
    let not_first = 0;
    for (const t of r.choices[0].logprobs.content) {
      const at = t.top_logprobs.findIndex((a) => a.bytes.join() === t.bytes.join());
      assert.ok(at >= 0, `sampled token ${t.token} is not among the top 20`);
      assert.equal(t.top_logprobs[at].logprob, t.logprob);
      if (at > 0) not_first++;
    }
    assert.ok(not_first > 0, 'temperature 1.5 never sampled below the top token');
  });

  test('completions logprobs: the legacy shape with offsets', async () => {
    const r = await s.client.completions.create({ model: s.srv.model, prompt: 'Lava is', max_tokens: 6, temperature: 0, logprobs: 3 });
    const l = r.choices[0].logprobs;
    assert.equal(l.tokens.length, r.usage.completion_tokens);
    assert.equal(l.token_logprobs.length, l.tokens.length);
    assert.equal(l.tokens.join(''), r.choices[0].text);
    assert.equal(l.text_offset[0], 0);
    for (let i = 1; i < l.tokens.length; i++)
      assert.equal(l.text_offset[i], l.text_offset[i - 1] + Buffer.byteLength(l.tokens[i - 1]));
    for (let i = 0; i < l.tokens.length; i++) {
      assert.ok(Object.keys(l.top_logprobs[i]).length <= 3);
      assert.equal(Math.max(...Object.values(l.top_logprobs[i])), l.token_logprobs[i]);
    }
  });

  test('n choices: choice i answers as a request of its own with seed + i', async () => {
    const params = { model: s.srv.model, messages, max_tokens: 10, temperature: 1.2, seed: 40 };
    const r = await s.client.chat.completions.create({ ...params, n: 3 });
    assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
    let total = 0;
    for (let i = 0; i < 3; i++) {
      const one = await s.client.chat.completions.create({ ...params, seed: 40 + i });
      assert.equal(r.choices[i].message.content, one.choices[0].message.content, `choice ${i}`);
      total += one.usage.completion_tokens;
    }
    assert.equal(r.usage.completion_tokens, total);
    assert.notEqual(r.choices[0].message.content, r.choices[1].message.content);
    const chunks = await collect(await s.client.chat.completions.create({ ...params, n: 3, stream: true }));
    for (let i = 0; i < 3; i++) {
      const text = chunks.filter((c) => c.choices[0]?.index === i).map((c) => c.choices[0].delta?.content ?? '').join('');
      assert.equal(text, r.choices[i].message.content, `streamed choice ${i}`);
    }
  });

  const schema = {
    type: 'object',
    properties: {
      name: { type: 'string', maxLength: 12 },
      age: { type: 'integer' },
      tags: { type: 'array', items: { enum: ['red', 'green', 'blue'] }, maxItems: 3 },
      alive: { type: 'boolean' },
      home: { type: 'object', properties: { city: { type: 'string', maxLength: 8 } }, required: ['city'], additionalProperties: false },
    },
    required: ['name', 'age', 'tags', 'alive', 'home'],
    additionalProperties: false,
  };
  function validate(v) {
    assert.deepEqual(Object.keys(v), ['name', 'age', 'tags', 'alive', 'home']);
    assert.equal(typeof v.name, 'string');
    assert.ok([...v.name].length <= 12);
    assert.ok(Number.isInteger(v.age));
    assert.ok(Array.isArray(v.tags) && v.tags.length <= 3);
    for (const t of v.tags) assert.ok(['red', 'green', 'blue'].includes(t));
    assert.equal(typeof v.alive, 'boolean');
    assert.deepEqual(Object.keys(v.home), ['city']);
    assert.ok([...v.home.city].length <= 8);
  }

  test('json_schema: 20 seeds, every reply parses and validates', async () => {
    const replies = await Promise.all(Array.from({ length: 20 }, (_, seed) => s.client.chat.completions.create({
      model: s.srv.model, messages: [{ role: 'user', content: 'A person as JSON.' }], max_tokens: 1000,
      temperature: 1, seed,
      response_format: { type: 'json_schema', json_schema: { name: 'person', schema, strict: true } },
    })));
    for (const [seed, r] of replies.entries()) {
      const c = r.choices[0];
      assert.equal(c.finish_reason, 'stop', `seed ${seed}: ${c.message.content}`);
      validate(JSON.parse(c.message.content));
    }
  });

  test('json_object: replies that end by themselves are JSON objects', async () => {
    for (let seed = 0; seed < 5; seed++) {
      const r = await s.client.chat.completions.create({
        model: s.srv.model, messages, max_tokens: 300, temperature: 1, seed, response_format: { type: 'json_object' },
      });
      const c = r.choices[0];
      if (c.finish_reason !== 'stop') continue;
      const v = JSON.parse(c.message.content);
      assert.equal(typeof v, 'object');
      assert.ok(v !== null && !Array.isArray(v));
    }
  });

  test('tools on a template without tool calling: 400 naming tools', async () => {
    await assert.rejects(s.client.chat.completions.create({
      model: s.srv.model, messages, tools: [{ type: 'function', function: { name: 'f' } }],
    }), (e) => e instanceof OpenAI.BadRequestError && e.param === 'tools');
  });
});

const weather = {
  type: 'function',
  function: {
    name: 'get_weather',
    description: 'The weather in a city.',
    parameters: {
      type: 'object',
      properties: { city: { type: 'string', maxLength: 20 }, unit: { enum: ['c', 'f'] } },
      required: ['city', 'unit'],
      additionalProperties: false,
    },
  },
};
const clock = {
  type: 'function',
  function: {
    name: 'get_time',
    parameters: { type: 'object', properties: { zone: { enum: ['utc', 'local'] } }, required: ['zone'], additionalProperties: false },
  },
};

describe('tool calls (Qwen3 template)', { skip: !QWEN || !existsSync(QWEN) ? `no Qwen3 model (ML_MODEL_QWEN=${QWEN})` : false }, () => {
  const s = withServer(['--ctx', '1024', '-t', '2', '--chat', 'qwen3-nothink'], { model: QWEN });
  const ask = [{ role: 'user', content: 'Weather in Reykjavik?' }];

  test('a required call comes back in OpenAI shape, and its result goes back to the model', async () => {
    const r = await s.client.chat.completions.create({
      model: s.srv.model, messages: ask, tools: [weather, clock], tool_choice: { type: 'function', function: { name: 'get_weather' } },
      max_tokens: 300, temperature: 1, seed: 3,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.content, null);
    assert.equal(c.message.tool_calls.length, 1);
    const call = c.message.tool_calls[0];
    assert.match(call.id, /^call_/);
    assert.equal(call.type, 'function');
    assert.equal(call.function.name, 'get_weather');
    const args = JSON.parse(call.function.arguments);
    assert.deepEqual(Object.keys(args), ['city', 'unit']);
    assert.ok(['c', 'f'].includes(args.unit));
    // The round trip: the call and its result in the conversation, the model answers.
    const turn2 = [...ask, c.message, { role: 'tool', tool_call_id: call.id, content: '7 degrees' }];
    const r2 = await s.client.chat.completions.create({ model: s.srv.model, messages: turn2, tools: [weather, clock], max_tokens: 8, temperature: 0 });
    assert.equal(r2.choices[0].message.role, 'assistant');
    assert.ok(r2.usage.prompt_tokens > r.usage.prompt_tokens);
  });

  test('"required" with several tools picks one of them; streamed calls arrive as tool_calls deltas', async () => {
    const names = new Set();
    for (let seed = 0; seed < 6; seed++) {
      const r = await s.client.chat.completions.create({
        model: s.srv.model, messages: ask, tools: [weather, clock], tool_choice: 'required', max_tokens: 300, temperature: 1, seed,
      });
      const calls = r.choices[0].message.tool_calls;
      assert.equal(calls?.length, 1, JSON.stringify(r.choices[0]));
      names.add(calls[0].function.name);
      // Each call's arguments follow its own tool's schema (the switch once the name is written).
      const args = JSON.parse(calls[0].function.arguments);
      if (calls[0].function.name === 'get_time') assert.deepEqual(Object.keys(args), ['zone']);
      else assert.deepEqual(Object.keys(args), ['city', 'unit']);
    }
    assert.equal(names.size, 2, 'six seeds all called the same tool');
    const chunks = await collect(await s.client.chat.completions.create({
      model: s.srv.model, messages: ask, tools: [weather], tool_choice: 'required', max_tokens: 300, temperature: 1, seed: 5, stream: true,
    }));
    const deltas = chunks.flatMap((ch) => ch.choices[0]?.delta?.tool_calls ?? []);
    assert.equal(deltas.length, 1);
    assert.equal(deltas[0].function.name, 'get_weather');
    JSON.parse(deltas[0].function.arguments);
    assert.equal(chunks.map((ch) => ch.choices[0]?.delta?.content ?? '').join(''), '');
    assert.equal(chunks.at(-1).choices[0].finish_reason, 'tool_calls');
  });
});

// Llama 3.1's format: the whole reply is {"name": …, "parameters": {…}}, with no tags around it.
describe('tool calls (Llama 3.1 template)', () => {
  const s = withServer(['--ctx', '1024', '-t', '2', '--chat', 'llama3.1']);

  test('a required call is parsed from the JSON reply, and the round trip renders', async () => {
    const ask = [{ role: 'user', content: 'Weather in Oslo?' }];
    const r = await s.client.chat.completions.create({
      model: s.srv.model, messages: ask, tools: [weather], tool_choice: 'required', max_tokens: 300, temperature: 1, seed: 2,
    });
    const c = r.choices[0];
    assert.equal(c.finish_reason, 'tool_calls', JSON.stringify(c));
    assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
    assert.deepEqual(Object.keys(JSON.parse(c.message.tool_calls[0].function.arguments)), ['city', 'unit']);
    const turn2 = [...ask, c.message, { role: 'tool', tool_call_id: c.message.tool_calls[0].id, content: '3 degrees' }];
    const r2 = await s.client.chat.completions.create({ model: s.srv.model, messages: turn2, tools: [weather], max_tokens: 4, temperature: 0 });
    assert.equal(r2.choices[0].message.role, 'assistant');
  });
});

// --lookup (speculative decoding by prompt lookup) and --draft (by a draft model: here the
// same model quantized to Q4_0) change the speed, not the replies: the same requests, several
// at once, with log probabilities, answer as on a server without them (greedy ones token for
// token with either; sampled ones too with --lookup, whose sampler sees the same draws, while
// a draft model's standard rule keeps only the distribution), and /metrics counts the drafts
// kept. On the trained model (converted here), whose text repeats, so drafts are kept; random
// models hardly ever pick a drafted token.
describe('--lookup, --draft', () => {
  const dir = mkdtempSync(join(tmpdir(), 'krafla-lookup-'));
  const model = join(dir, 'brown-q8_0.mlb');
  const draft = join(dir, 'brown-q4_0.mlb');
  before(() => {  // registered first, so it runs before the servers' own before() hooks
    for (const [out, quant] of [[model, 'q8_0'], [draft, 'q4_0']]) {
      const conv = spawnSync(process.env.ML_PYTHON ?? '/usr/bin/python3',
        [join(ROOT, 'tools', 'convert.py'), join(ROOT, 'models', 'brown-llama'), '-o', out, '--quant', quant],
        { encoding: 'utf8' });
      assert.equal(conv.status, 0, conv.stderr);
    }
  });
  const common = ['--ctx', '256', '-t', '1', '--parallel', '2'];
  const servers = {
    plain: withServer(common, { model }),
    lookup: withServer([...common, '--lookup', '6'], { model }),
    draft: withServer([...common, '--draft', draft, '--draft-max', '4', '--draft-p-min', '0'], { model }),
  };
  after(() => rmSync(dir, { recursive: true, force: true }));
  const prompts = [
    'The jury said it did not find that many of the voters were in favor of the plan.',
    'The history of the county was written by',
    'He said that the man who was in the house was not',
    'It is not',
  ];
  const ask = ({ srv, client }) => Promise.all(prompts.flatMap((prompt, i) => [
    client.completions.create({ model: srv.model, prompt, max_tokens: 64, temperature: 0, logprobs: 2 }),
    client.completions.create({ model: srv.model, prompt, max_tokens: 64, temperature: 0.7, seed: 10 + i }),
  ]));
  const kept = async ({ srv }) => {
    const metrics = await (await fetch(`${srv.url}/metrics`)).text();
    const n = (name) => Number(new RegExp(`krafla_${name}_tokens_total\\{[^}]*\\} (\\d+)`).exec(metrics)[1]);
    assert.ok(n('accepted') > 0 && n('accepted') <= n('drafted'), metrics);
  };
  let plain;
  before(async () => { plain = await ask(servers.plain); });

  for (const [name, sampledToo] of [['lookup', true], ['draft', false]]) {
    test(`--${name}: the same replies as without it, and drafts are kept`, async () => {
      const b = await ask(servers[name]);
      for (let i = 0; i < plain.length; i++) {
        if (i % 2 && !sampledToo) {
          assert.ok(b[i].usage.completion_tokens > 0, `request ${i} usage`);
          continue;
        }
        const a = plain;
        assert.equal(b[i].choices[0].text, a[i].choices[0].text, `request ${i}`);
        assert.deepEqual(b[i].choices[0].logprobs, a[i].choices[0].logprobs, `request ${i} logprobs`);
        // (cached_tokens depends on which slot a request found free)
        assert.equal(b[i].usage.completion_tokens, a[i].usage.completion_tokens, `request ${i} usage`);
      }
      await kept(servers[name]);
    });
  }
});
