// Regenerates fixtures/NAME.json: for every text of texts.json, the reference ids (with and
// without special tokens) and the reference decodes of those ids. The reference is
// @lenml/tokenizers (a dependency-free fork of transformers.js), pinned in package.json.
//   cd tests/tokenizer && npm install && node gen_fixtures.mjs [NAME...]
// Tokenizer files come from scripts/fetch_tokenizers.sh (.models/tokenizers/NAME).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { TokenizerLoader } from "@lenml/tokenizers";

const here = path.dirname(fileURLToPath(import.meta.url));
const modelsDir = process.env.KRAFLA_TOKENIZERS ?? path.join(here, "../../.models/tokenizers");
// A fixture name is a tokenizer folder, or a folder plus tokenizer_config.json overrides.
const variants = {
  // transformers' LlamaTokenizer with legacy=false: Metaspace pre-tokenizer, "▁" trick.
  llama2_nonlegacy: { dir: "llama2", config: { legacy: false } },
};
const names = process.argv.length > 2 ? process.argv.slice(2)
  : ["llama2", "llama3", "llama3_1", "qwen3", "gemma3", ...Object.keys(variants)];
const texts = JSON.parse(fs.readFileSync(path.join(here, "texts.json"), "utf8"));

// The reference throws on decode([]); Hugging Face returns "".
const decode = (tok, ids, opts) => (ids.length === 0 ? "" : tok.decode(ids, opts));

fs.mkdirSync(path.join(here, "fixtures"), { recursive: true });
for (const name of names) {
  const variant = variants[name] ?? { dir: name, config: {} };
  const dir = path.join(modelsDir, variant.dir);
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: {
      ...JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
      ...variant.config,
    },
  });
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
    return c;
  });
  const out = {
    tokenizer: variant.dir,
    config_overrides: variant.config,
    reference: "@lenml/tokenizers@3.7.2",
    texts: "texts.json",
    count: texts.length,
    cases,
  };
  const file = path.join(here, "fixtures", `${name}.json`);
  fs.writeFileSync(file, JSON.stringify(out).replace(/\},\{/g, "},\n{") + "\n");
  console.log(`${file}: ${cases.length} cases`);
}
