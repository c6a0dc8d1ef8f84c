// ml_server driven by the unmodified official OpenAI SDK. Greedy decoding (temperature 0) makes
// every answer a function of the prompt, so streamed and whole responses can be compared.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import OpenAI from 'openai';

import { startServer } from './harness.mjs';

const KEY = 'sk-krafla-test';
const CTX = 256;
let srv;
let client;

before(async () => {
  srv = await startServer(['--api-key', KEY, '--ctx', String(CTX), '-t', '2']);
  client = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey: KEY, maxRetries: 0, timeout: 30000 });
});

after(async () => {
  const { code } = await srv.stop();
  assert.equal(code, 0, `ml_server exit code after SIGTERM\n${srv.log()}`);
});

const greedy = { temperature: 0, seed: 1 };
const hello = [
  { role: 'system', content: 'You are terse.' },
  { role: 'user', content: 'Say something about volcanoes.' },
];

async function chatText(params) {
  const r = await client.chat.completions.create({ model: srv.model, ...greedy, ...params });
  return r;
}

async function streamChat(params) {
  const stream = await client.chat.completions.create({
    model: srv.model, ...greedy, ...params, stream: true, stream_options: { include_usage: true },
  });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  const text = chunks.map((c) => c.choices[0]?.delta?.content ?? '').join('');
  return { chunks, text };
}

test('models.list names the served model', async () => {
  const list = await client.models.list();
  assert.equal(list.data.length, 1);
  assert.equal(list.data[0].id, srv.model);
  assert.equal(list.data[0].object, 'model');
});

test('models.retrieve: the served model, NotFoundError for another id', async () => {
  const m = await client.models.retrieve(srv.model);
  assert.equal(m.id, srv.model);
  assert.equal(m.object, 'model');
  assert.equal(m.owned_by, 'krafla');
  assert.equal(typeof m.created, 'number');
  await rejects(client.models.retrieve('gpt-4o'), OpenAI.NotFoundError, 404,
    (e) => assert.equal(e.code, 'model_not_found'));
});

test('chat completion has the OpenAI shape', async () => {
  const r = await chatText({ messages: hello, max_tokens: 12 });
  assert.match(r.id, /^chatcmpl-/);
  assert.equal(r.object, 'chat.completion');
  assert.equal(r.model, srv.model);
  assert.equal(typeof r.created, 'number');
  assert.equal(r.choices.length, 1);
  const c = r.choices[0];
  assert.equal(c.index, 0);
  assert.equal(c.message.role, 'assistant');
  assert.equal(typeof c.message.content, 'string');
  assert.ok(['stop', 'length'].includes(c.finish_reason));
  assert.ok(r.usage.prompt_tokens > 5);
  assert.ok(r.usage.completion_tokens <= 12 && r.usage.completion_tokens > 0);
  assert.equal(r.usage.total_tokens, r.usage.prompt_tokens + r.usage.completion_tokens);
  assert.equal(typeof r.usage.prompt_tokens_details.cached_tokens, 'number');
});

test('max_completion_tokens limits like max_tokens', async () => {
  const r = await chatText({ messages: hello, max_completion_tokens: 3 });
  assert.equal(r.usage.completion_tokens, 3);
  assert.equal(r.choices[0].finish_reason, 'length');
});

test('streamed chat equals the whole response, with role first and usage last', async () => {
  const whole = await chatText({ messages: hello, max_tokens: 16 });
  const { chunks, text } = await streamChat({ messages: hello, max_tokens: 16 });
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(chunks[0].object, 'chat.completion.chunk');
  assert.equal(chunks[0].choices[0].delta.role, 'assistant');
  const last = chunks.at(-1);
  assert.deepEqual(last.choices, []);
  assert.equal(last.usage.completion_tokens, whole.usage.completion_tokens);
  assert.equal(last.usage.prompt_tokens, whole.usage.prompt_tokens);
  const fin = chunks.at(-2);
  assert.equal(fin.choices[0].finish_reason, whole.choices[0].finish_reason);
  for (const c of chunks) assert.equal(c.id, chunks[0].id);
});

test('text completion, whole and streamed', async () => {
  const params = { model: srv.model, prompt: 'The capital of Iceland is', max_tokens: 10, ...greedy };
  const whole = await client.completions.create(params);
  assert.match(whole.id, /^cmpl-/);
  assert.equal(whole.object, 'text_completion');
  assert.equal(whole.usage.completion_tokens, 10);
  assert.equal(whole.choices[0].finish_reason, 'length');
  const stream = await client.completions.create({
    ...params, stream: true, stream_options: { include_usage: true },
  });
  let text = '';
  let usage = null;
  for await (const c of stream) {
    if (c.usage) usage = c.usage;
    text += c.choices[0]?.text ?? '';
  }
  assert.equal(text, whole.choices[0].text);
  assert.equal(usage.completion_tokens, 10);
});

test('completion default max_tokens is 16 (OpenAI legacy default)', async () => {
  const r = await client.completions.create({ model: srv.model, prompt: 'Once upon a time', ...greedy });
  assert.ok(r.usage.completion_tokens <= 16);
});

test('token-id prompt', async () => {
  const r = await client.completions.create({ model: srv.model, prompt: [1, 2, 3, 4], max_tokens: 4, ...greedy });
  assert.equal(r.usage.prompt_tokens, 4);
});

// A stop string taken from the middle of the unstopped answer: the answer must end right before
// its first occurrence, whole and streamed (where it usually straddles chunks).
test('stop sequences cut the text, whole and streamed', async () => {
  const full = (await chatText({ messages: hello, max_tokens: 40 })).choices[0].message.content;
  const chars = Array.from(full);
  assert.ok(chars.length >= 12, `answer too short to pick a stop string: ${JSON.stringify(full)}`);
  const stop = chars.slice(Math.floor(chars.length / 2), Math.floor(chars.length / 2) + 3).join('');
  const expected = full.slice(0, full.indexOf(stop));
  const cut = await chatText({ messages: hello, max_tokens: 40, stop: [stop, '\u0000never'] });
  assert.equal(cut.choices[0].message.content, expected);
  assert.equal(cut.choices[0].finish_reason, 'stop');
  const { chunks, text } = await streamChat({ messages: hello, max_tokens: 40, stop });
  assert.equal(text, expected);
  assert.equal(chunks.at(-2).choices[0].finish_reason, 'stop');
});

test('stop string on completions', async () => {
  const params = { model: srv.model, prompt: 'Lava flows', max_tokens: 30, ...greedy };
  const full = (await client.completions.create(params)).choices[0].text;
  const chars = Array.from(full);
  assert.ok(chars.length >= 8);
  const stop = chars.slice(chars.length - 4, chars.length - 2).join('');
  const r = await client.completions.create({ ...params, stop: [stop] });
  assert.equal(r.choices[0].text, full.slice(0, full.indexOf(stop)));
  assert.equal(r.choices[0].finish_reason, 'stop');
});

test('second turn of a conversation reuses the KV cache (cached_tokens > 0)', async () => {
  const first = await chatText({ messages: hello, max_tokens: 8 });
  const turn2 = [...hello, first.choices[0].message, { role: 'user', content: 'And geysers?' }];
  const second = await chatText({ messages: turn2, max_tokens: 8 });
  const cached = second.usage.prompt_tokens_details.cached_tokens;
  assert.ok(cached >= first.usage.prompt_tokens,
    `cached ${cached} < first prompt ${first.usage.prompt_tokens}`);
  assert.ok(cached < second.usage.prompt_tokens);
});

test('concurrent clients are queued, none fail', async () => {
  const jobs = [];
  for (let i = 0; i < 6; i++) {
    const messages = [{ role: 'user', content: `Number ${i}` }];
    jobs.push(i % 2 ? streamChat({ messages, max_tokens: 6 }) : chatText({ messages, max_tokens: 6 }));
  }
  const results = await Promise.all(jobs);
  assert.equal(results.length, 6);
});

// ---- bad input: the SDK raises its typed errors, the server keeps serving ----

async function rejects(promise, Cls, status, check = () => {}) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof Cls, `expected ${Cls.name}, got ${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.equal(typeof e.error?.message, 'string');
    check(e);
    return true;
  });
}

test('missing or wrong API key → 401', async () => {
  for (const apiKey of ['wrong-key', 'sk-krafla-tes']) {
    const bad = new OpenAI({ baseURL: `${srv.url}/v1`, apiKey, maxRetries: 0 });
    await rejects(bad.models.list(), OpenAI.AuthenticationError, 401,
      (e) => assert.equal(e.code, 'invalid_api_key'));
  }
  const r = await fetch(`${srv.url}/v1/models`);
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.code, 'invalid_api_key');
});

test('unknown model → 404 model_not_found', async () => {
  await rejects(client.chat.completions.create({ model: 'gpt-nope', messages: hello }),
    OpenAI.NotFoundError, 404, (e) => {
      assert.equal(e.code, 'model_not_found');
      assert.equal(e.param, 'model');
    });
});

test('prompt longer than --ctx → 400 context_length_exceeded', async () => {
  const long = 'lava '.repeat(CTX * 2);
  await rejects(client.chat.completions.create({ model: srv.model, messages: [{ role: 'user', content: long }] }),
    OpenAI.BadRequestError, 400, (e) => assert.equal(e.code, 'context_length_exceeded'));
  await rejects(client.completions.create({ model: srv.model, prompt: long }),
    OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'prompt'));
});

test('wrong types and values → 400 naming the parameter', async () => {
  const cases = [
    [{ temperature: 'hot' }, 'temperature', 'invalid_type'],
    [{ temperature: 7 }, 'temperature', 'invalid_value'],
    [{ max_tokens: -1 }, 'max_tokens', 'invalid_value'],
    [{ max_tokens: 2.5 }, 'max_tokens', 'invalid_type'],
    [{ stop: 42 }, 'stop', 'invalid_type'],
    [{ stream: 'yes' }, 'stream', 'invalid_type'],
    [{ seed: 'x' }, 'seed', 'invalid_type'],
    [{ n: 17 }, 'n', 'invalid_value'],
    [{ top_logprobs: 2 }, 'top_logprobs', 'invalid_value'],
    [{ frequency_penalty: 0.5 }, 'frequency_penalty', 'unsupported_parameter'],
    [{ messages: 'hi' }, 'messages', 'invalid_type'],
    [{ messages: [] }, 'messages', 'invalid_value'],
    [{ messages: [{ role: 'wizard', content: 'x' }] }, 'messages[0].role', 'unsupported_parameter'],
    [{ messages: [{ role: 'user', content: 5 }] }, 'messages[0].content', 'invalid_type'],
  ];
  for (const [extra, param, code] of cases) {
    await rejects(client.chat.completions.create({ model: srv.model, messages: hello, ...extra }),
      OpenAI.BadRequestError, 400, (e) => {
        assert.equal(e.param, param, JSON.stringify(extra));
        assert.equal(e.code, code, JSON.stringify(extra));
      });
  }
  await rejects(client.completions.create({ model: srv.model, prompt: { text: 'x' } }),
    OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'prompt'));
  await rejects(client.completions.create({ model: srv.model, prompt: [1e9] }),
    OpenAI.BadRequestError, 400, (e) => assert.equal(e.param, 'prompt'));
});

// Fields this server does not implement are refused by name, whoever sends them (llama.cpp and
// Ollama clients send mirostat, grammar, …); metadata the SDKs send is accepted.
test('unknown and unimplemented fields → 400 unsupported_parameter naming the field', async () => {
  const cases = [
    [{ mirostat: 2 }, 'mirostat', 'unsupported_parameter'],
    [{ grammar: 'root ::= "x"' }, 'grammar', 'unsupported_parameter'],
    [{ logit_bias: { 42: 10 } }, 'logit_bias', 'unsupported_parameter'],
    [{ tool_choice: 'required' }, 'tool_choice', 'invalid_value'],
    [{ response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'string', format: 'email' } } } },
      'response_format', 'invalid_value'],
    [{ min_p: 'abc' }, 'min_p', 'invalid_type'],
    [{ min_p: 1.5 }, 'min_p', 'invalid_value'],
    [{ user: 42 }, 'user', 'invalid_type'],
  ];
  for (const [extra, param, code] of cases) {
    await rejects(client.chat.completions.create({ model: srv.model, messages: hello, ...extra }),
      OpenAI.BadRequestError, 400, (e) => {
        assert.equal(e.param, param, JSON.stringify(extra));
        assert.equal(e.code, code, JSON.stringify(extra));
      });
  }
});

test('metadata fields, no-op values and min_p are accepted', async () => {
  const r = await chatText({
    messages: hello, max_tokens: 2, min_p: 0.05, user: 'user-1', metadata: { run: 'test' },
    store: false, service_tier: 'auto', safety_identifier: 'h', prompt_cache_key: 'k', n: 1,
    logprobs: false, tools: [], frequency_penalty: 0, presence_penalty: 0,
  });
  assert.equal(r.usage.completion_tokens, 2);
  // A reply appended as the SDK returned it (with refusal: null, …) is a valid next message.
  const next = await chatText({
    messages: [...hello, r.choices[0].message, { role: 'user', content: 'More.' }], max_tokens: 2,
  });
  assert.equal(next.usage.completion_tokens, 2);
});

test('the server still answers after the errors', async () => {
  const r = await chatText({ messages: hello, max_tokens: 2 });
  assert.equal(r.usage.completion_tokens, 2);
});
