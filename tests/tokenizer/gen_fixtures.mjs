// Regenerates fixtures/NAME.json: for every text of texts.json, the reference ids (with and
// without special tokens, and without parsing special-token text) and the reference decodes
// of those ids. The reference is
// @lenml/tokenizers (a dependency-free fork of transformers.js), pinned in package.json.
//   cd tests/tokenizer && npm install && node gen_fixtures.mjs [NAME...]
// Tokenizer files come from scripts/fetch_tokenizers.sh (.models/tokenizers/NAME).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TokenizerLoader } from "@lenml/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
const modelsDir = process.env.KRAFLA_TOKENIZERS ?? path.join(here, "../../.models/tokenizers");
// A fixture name is a tokenizer folder, or a folder plus tokenizer_config.json overrides
// (config) and replacements of top-level tokenizer.json keys (tokenizer). The test applies the
// same overrides, so a synthetic tokenizer never needs a file of its own.
const byteLevel = (addPrefixSpace) =>
  ({ type: "ByteLevel", add_prefix_space: addPrefixSpace, trim_offsets: true, use_regex: true });
// Synthetic GPT-2-style tokenizers: Qwen3's byte-level vocabulary and merges behind the
// pre-tokenizers of files we cannot fetch offline, with no normalizer, as those files have.
const gpt2Like = (preTokenizer, extra = {}) => ({
  normalizer: null,
  pre_tokenizer: preTokenizer,
  post_processor: { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
  ...extra,
});
// model_additions: vocabulary entries and merges (lowest priority) added to the model.
const withAdditions = (json, add) => {
  if (!add) return json;
  const vocab = { ...json.model.vocab, ...add.vocab };
  const merges = [...json.model.merges, ...add.merges];
  return { ...json, model: { ...json.model, vocab, merges } };
};
// Qwen3 has no multi-digit tokens, which would hide how digits are split; these tokens (ids
// after its added tokens) and merges give it GPT-2's "Ġd", "Ġdd" and "dd" ("Ġ" first).
const digitTokens = () => {
  const d = [..."0123456789"];
  const merges = [
    ...d.map((x) => ["\u0120", x]),
    ...d.flatMap((x) => d.map((y) => [`\u0120${x}`, y])),
    ...d.flatMap((x) => d.map((y) => [x, y])),
  ];
  return { vocab: Object.fromEntries(merges.map(([a, b], i) => [a + b, 151669 + i])), merges };
};
// Qwen3's vocabulary was learnt with combining marks split off their letters, so it has few
// tokens that join a letter and the mark after it: on many texts (Devanagari, Latin with
// combining marks) Qwen3.5's split gives Qwen3's ids. These merges (lowest priority, new ids
// after the added tokens) join every two tokens that meet where a letter is followed by a mark
// in Qwen3's encoding of the texts. Qwen3's split always cuts there (a \p{L}+ run ends before a
// mark), so they never fire for it; Qwen3.5 keeps [\p{L}\p{M}]+ together, so they do, and the
// ids show which rule split the text.
const byteOfChar = (() => {
  const bs = [];
  for (let b = 0; b < 256; ++b) if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174) bs.push(b);
  const cs = [...bs];
  for (let b = 0, n = 0; b < 256; ++b) if (!bs.includes(b)) bs.push(b), cs.push(256 + n++);
  return new Map(cs.map((c, i) => [String.fromCharCode(c), bs[i]]));
})();
const letterMarkMerges = (tok, texts, firstId) => {
  const merges = new Map();
  for (const text of texts) {
    const tokens = tok.tokenize(text);
    const bytes = tokens.flatMap((t) => [...t].map((c) => byteOfChar.get(c)));
    // The code point that starts at each byte offset of the normalized text (none inside one).
    const starts = new Map();
    let off = 0;
    for (const ch of text.normalize("NFC")) {
      starts.set(off, ch);
      off += new TextEncoder().encode(ch).length;
    }
    if (off !== bytes.length) continue;  // added tokens that are not byte-level text
    let end = 0, prev = null;
    for (let i = 0; i + 1 < tokens.length; ++i) {
      end += [...tokens[i]].length;
      for (let k = end - 1; k >= 0; --k) if (starts.has(k)) { prev = starts.get(k); break; }
      const next = starts.get(end);
      if (next && /\p{L}/u.test(prev) && /\p{M}/u.test(next)) merges.set(`${tokens[i]} ${tokens[i + 1]}`, [tokens[i], tokens[i + 1]]);
    }
  }
  const list = [...merges.values()];
  return { vocab: Object.fromEntries(list.map(([a, b], i) => [a + b, firstId + i])), merges: list };
};
const variants = {
  // qwen3_5 plus letterMarkMerges (computed below).
  qwen3_5_marks: { dir: "qwen3_5", config: {} },
  // transformers' LlamaTokenizer with legacy=false: Metaspace pre-tokenizer, "▁" trick.
  llama2_nonlegacy: { dir: "llama2", config: { legacy: false } },
  // GPT-2: ByteLevel applies the GPT-2 regex itself (use_regex=true).
  gpt2_style: {
    dir: "qwen3",
    model: digitTokens(),
    config: { tokenizer_class: "GPT2Tokenizer", clean_up_tokenization_spaces: true },
    tokenizer: gpt2Like(byteLevel(false)),
  },
  // SmolLM2: every digit split off first, then ByteLevel with the GPT-2 regex.
  smollm2_style: {
    dir: "qwen3",
    model: digitTokens(),
    config: { tokenizer_class: "GPT2Tokenizer", clean_up_tokenization_spaces: false },
    tokenizer: gpt2Like({
      type: "Sequence",
      pretokenizers: [{ type: "Digits", individual_digits: true }, byteLevel(false)],
    }),
  },
  // The other settings: digit runs kept whole, a prefix space on every word, and a
  // TemplateProcessing post-processor that puts <|endoftext|> first.
  bytelevel_prefix: {
    dir: "qwen3",
    model: digitTokens(),
    config: { tokenizer_class: "GPT2Tokenizer", clean_up_tokenization_spaces: false },
    tokenizer: gpt2Like(
      {
        type: "Sequence",
        pretokenizers: [{ type: "Digits", individual_digits: false }, byteLevel(true)],
      },
      {
        post_processor: {
          type: "TemplateProcessing",
          single: [
            { SpecialToken: { id: "<|endoftext|>", type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
          ],
          pair: [
            { SpecialToken: { id: "<|endoftext|>", type_id: 0 } },
            { Sequence: { id: "A", type_id: 0 } },
            { Sequence: { id: "B", type_id: 1 } },
          ],
          special_tokens: {
            "<|endoftext|>": { id: "<|endoftext|>", ids: [151643], tokens: ["<|endoftext|>"] },
          },
        },
      },
    ),
  },
};
const names = process.argv.length > 2 ? process.argv.slice(2)
  : ["llama2", "llama3", "llama3_1", "qwen3", "qwen3_5", "gemma3", ...Object.keys(variants)];
const texts = JSON.parse(fs.readFileSync(path.join(here, "texts.json"), "utf8"));

// The reference throws on decode([]); Hugging Face returns "".
const decode = (tok, ids, opts) => (ids.length === 0 ? "" : tok.decode(ids, opts));

const load = (variant) => {
  const dir = path.join(modelsDir, variant.dir);
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: {
      ...withAdditions(
        JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
        variant.model,
      ),
      ...variant.tokenizer,
    },
    tokenizerConfig: {
      ...JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
      ...variant.config,
    },
  });
};

if (names.includes("qwen3_5_marks")) {
  const qwen3 = load({ dir: "qwen3", config: {} });
  const add = letterMarkMerges(qwen3, texts, 151669);
  variants.qwen3_5_marks.model = add;
  // The claim above, checked: Qwen3's split with these merges gives Qwen3's ids on every text.
  const qwen3Marks = load({ dir: "qwen3", config: {}, model: add });
  texts.forEach((t, i) => {
    const a = qwen3.encode(t, { add_special_tokens: false }), b = qwen3Marks.encode(t, { add_special_tokens: false });
    if (JSON.stringify(a) !== JSON.stringify(b)) throw new Error(`letter-mark merges fire under Qwen3's split: text ${i}`);
  });
  console.log(`qwen3_5_marks: ${add.merges.length} letter-mark merges`);
}

// HF's split_special_tokens=True (the Rust library's encode_special_tokens, llama.cpp's
// parse_special=false): special added tokens written in the text are not cut out, so the text
// goes through the normalizer, pre-tokenizer and model like any other; added tokens that are
// not special still are. The reference has no such switch, so its own splitter is rebuilt from
// the added tokens that are not special, and the special ones leave the map that would return
// a section equal to one of them as that token.
const withoutSpecialParsing = (tok) => {
  const kept = tok.added_tokens.filter((t) => !t.special);
  tok.added_tokens_splitter = new tok.added_tokens_splitter.constructor(kept.map((t) => t.content));
  tok.added_tokens_map = new Map(kept.map((t) => [t.content, t]));
  return tok;
};

fs.mkdirSync(path.join(here, "fixtures"), { recursive: true });
for (const name of names) {
  const variant = variants[name] ?? { dir: name, config: {} };
  const tok = load(variant);
  const tokNps = withoutSpecialParsing(load(variant));
  // To keep the files small, decoded_skip is left out when it equals the text, and
  // decoded_plain when it equals decoded_skip (the test fills them back in).
  const cases = texts.map((text) => {
    const ids = tok.encode(text, { add_special_tokens: true });
    const plain = tok.encode(text, { add_special_tokens: false });
    const c = { ids, plain, decoded: decode(tok, ids, {}) };
    const skip = decode(tok, ids, { skip_special_tokens: true });
    const decodedPlain = decode(tok, plain, {});
    if (skip !== text) c.decoded_skip = skip;
    if (decodedPlain !== skip) c.decoded_plain = decodedPlain;
    // plain_nps: add_special_tokens=false, special tokens not parsed; omitted when it equals plain.
    const nps = tokNps.encode(text, { add_special_tokens: false });
    if (JSON.stringify(nps) !== JSON.stringify(plain)) c.plain_nps = nps;
    return c;
  });
  const out = {
    tokenizer: variant.dir,
    config_overrides: variant.config,
    ...(variant.tokenizer ? { tokenizer_overrides: variant.tokenizer } : {}),
    ...(variant.model ? { model_additions: variant.model } : {}),
    reference: "@lenml/tokenizers@3.7.2",
    texts: "texts.json",
    count: texts.length,
    cases,
  };
  const file = path.join(here, "fixtures", `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(out).replace(/\},\{/g, "},\n{") + "\n");
  console.log(`${file}: ${cases.length} cases`);
}
