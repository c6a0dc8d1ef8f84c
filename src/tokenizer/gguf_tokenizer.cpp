// tokenizer.json / tokenizer_config.json texts from a GGUF's tokenizer.ggml.* keys, written the
// way Hugging Face's converters write them for the same tokenizer, so the one tokenizer
// implementation (src/tokenizer) serves both file formats.
//
// - `llama` (SentencePiece BPE with byte fallback): pieces, scores and token types. As
//   transformers' SentencePieceExtractor, every split of a normal or user-defined piece into
//   two pieces is a merge, ranked by the merged piece's score (then the left and right ids);
//   control, user-defined and unknown tokens become added tokens; add_space_prefix gives the
//   "▁" prepend.
// - `gpt2` (byte-level BPE): tokens, merges and token types; tokenizer.ggml.pre names the
//   pre-tokenizer, which is written as the tokenizer.json of that family has it (llama.cpp's
//   own regexes are rewrites of these).
#include "tokenizer/gguf_tokenizer.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <iterator>
#include <nlohmann/json.hpp>

#include "krafla/error.h"
#include "tokenizer/flat_index.h"

namespace krafla {
namespace {

using nlohmann::json;

// model.merges: the left and right strings of each, in rank order.
using Merges = std::vector<std::pair<std::string_view, std::string_view>>;

// tokenizer.ggml.token_type (llama.cpp's llama_token_type)
enum TokenType {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

[[noreturn]] void fail(const GgufFile& g, const std::string& msg) {
  throw Error(fmt::format("{}: {}", g.path(), msg));
}

struct Vocab {
  const std::vector<std::string>& tokens;
  std::vector<int> types;
  tok::TokenIndex index;  // first id of each string

  int find(std::string_view s) const { return index.find(s, tokens); }
};

Vocab read_vocab(const GgufFile& g) {
  const GgufValue& t = g.array("tokenizer.ggml.tokens");
  if (t.elem != GgufType::String) fail(g, "tokenizer.ggml.tokens is not an array of strings");
  if (t.strings.empty()) fail(g, "tokenizer.ggml.tokens is empty");
  Vocab v{t.strings, std::vector<int>(t.strings.size(), kNormal), {}};
  if (const GgufValue* ty = g.find("tokenizer.ggml.token_type")) {
    if (ty->type != GgufType::Array || ty->numbers.size() != t.strings.size())
      fail(g, fmt::format("tokenizer.ggml.token_type must list a type for each of the {} tokens",
                          t.strings.size()));
    for (size_t i = 0; i < ty->numbers.size(); ++i) v.types[i] = int(ty->numbers[i]);
  }
  v.index.reserve(t.strings.size(), t.strings);
  for (size_t i = t.strings.size(); i-- > 0;)
    v.index.insert(int32_t(i), t.strings);  // the first id wins
  return v;
}

// The id of a special-token key, checked against the vocabulary; -1 when absent.
int token_id(const GgufFile& g, const Vocab& v, const char* key) {
  const int64_t id = g.integer(key, -1);
  if (id >= int64_t(v.tokens.size()))
    fail(g, fmt::format("{} = {} is outside the {}-token vocabulary", key, id, v.tokens.size()));
  return int(id);
}

json added_tokens(const Vocab& v) {
  json out = json::array();
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    const int t = v.types[i];
    if (t != kControl && t != kUserDefined && t != kUnknown) continue;
    out.push_back({{"id", i},
                   {"content", v.tokens[i]},
                   {"single_word", false},
                   {"lstrip", false},
                   {"rstrip", false},
                   {"normalized", false},
                   {"special", t != kUserDefined}});
  }
  return out;
}

json template_processing(const Vocab& v, int bos, int eos) {
  json single = json::array(), special = json::object();
  const auto add = [&](int id) {
    const std::string& s = v.tokens[size_t(id)];
    single.push_back({{"SpecialToken", {{"id", s}, {"type_id", 0}}}});
    special[s] = {{"id", s}, {"ids", {id}}, {"tokens", {s}}};
  };
  if (bos >= 0) add(bos);
  single.push_back({{"Sequence", {{"id", "A"}, {"type_id", 0}}}});
  if (eos >= 0) add(eos);
  return {{"type", "TemplateProcessing"},
          {"single", single},
          {"pair", json::array()},
          {"special_tokens", special}};
}

// A JSON string literal of `s` (the library's escaping; invalid UTF-8 throws json::exception).
void append_string(std::string& out, std::string_view s) { out += json(s).dump(); }

// tokenizer.json's text: `doc` and, inside its "model" object, "vocab" (each token string to its
// first id) and "merges", written straight as text. A JSON object of 150k entries would cost a
// second of allocation before the tokenizer reads the text back.
std::string tokenizer_json(json doc, const Vocab& v, const Merges& merges) {
  // An object's text without its closing brace, for more members to follow.
  const auto open = [](const json& o) {
    std::string text = o.dump();
    text.pop_back();
    return text;
  };
  json model = std::move(doc["model"]);
  doc.erase("model");
  std::string out = open(doc) + ",\"model\":" + open(model) + ",\"vocab\":{";
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.find(v.tokens[i]) != int(i)) continue;  // a repeat: the first id wins
    if (out.back() != '{') out += ',';
    append_string(out, v.tokens[i]);
    fmt::format_to(std::back_inserter(out), ":{}", i);
  }
  out += "},\"merges\":[";
  for (size_t i = 0; i < merges.size(); ++i) {
    out += i ? ",[" : "[";
    append_string(out, merges[i].first);
    out += ',';
    append_string(out, merges[i].second);
    out += ']';
  }
  out += "]}}";
  return out;
}

// tokenizer_config.json's bos/eos tokens and the file's chat template.
void config_tokens(const GgufFile& g, const Vocab& v, int bos, int eos, json& cfg) {
  if (bos >= 0) cfg["bos_token"] = v.tokens[size_t(bos)];
  if (eos >= 0) cfg["eos_token"] = v.tokens[size_t(eos)];
  if (const GgufValue* t = g.find("tokenizer.chat_template"); t && t->type == GgufType::String)
    cfg["chat_template"] = t->s;
}

// Byte length of the UTF-8 sequence that starts with byte c (1 for a stray byte).
size_t utf8_len(unsigned char c) {
  return c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
}

Merges spm_merges(const GgufFile& g, const Vocab& v) {
  const GgufValue& sc = g.array("tokenizer.ggml.scores");
  if (sc.numbers.size() != v.tokens.size())
    fail(g, fmt::format("tokenizer.ggml.scores has {} entries for {} tokens", sc.numbers.size(),
                        v.tokens.size()));
  struct Merge {
    double score;
    int merged, left, right;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.types[i] != kNormal && v.types[i] != kUserDefined) continue;
    const std::string_view t = v.tokens[i];
    if (t.empty()) continue;
    for (size_t k = utf8_len(static_cast<unsigned char>(t[0])); k < t.size();
         k += utf8_len(static_cast<unsigned char>(t[k]))) {
      const int l = v.find(t.substr(0, k));
      if (l < 0) continue;
      if (const int r = v.find(t.substr(k)); r >= 0)
        merges.push_back({sc.numbers[i], int(i), l, r});
    }
  }
  std::stable_sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    if (a.score != b.score) return a.score > b.score;
    if (a.merged != b.merged) return a.merged < b.merged;
    return std::pair(a.left, a.right) < std::pair(b.left, b.right);
  });
  Merges out;
  out.reserve(merges.size());
  for (const Merge& m : merges)
    out.emplace_back(v.tokens[size_t(m.left)], v.tokens[size_t(m.right)]);
  return out;
}

TokenizerFiles spm_files(const GgufFile& g) {
  const Vocab v = read_vocab(g);
  int unk = token_id(g, v, "tokenizer.ggml.unknown_token_id");
  if (unk < 0)
    for (size_t i = 0; i < v.tokens.size() && unk < 0; ++i)
      if (v.types[i] == kUnknown) unk = int(i);
  const int bos = token_id(g, v, "tokenizer.ggml.bos_token_id");
  const int eos = token_id(g, v, "tokenizer.ggml.eos_token_id");
  const bool add_bos = g.boolean("tokenizer.ggml.add_bos_token", true);
  const bool add_eos = g.boolean("tokenizer.ggml.add_eos_token", false);
  const bool prefix = g.boolean("tokenizer.ggml.add_space_prefix", true);

  json replace = {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\u2581"}};
  json normalizer = replace;
  if (prefix)
    normalizer = {{"type", "Sequence"},
                  {"normalizers", {{{"type", "Prepend"}, {"prepend", "\u2581"}}, replace}}};
  json decoders = {{{"type", "Replace"}, {"pattern", {{"String", "\u2581"}}}, {"content", " "}},
                   {{"type", "ByteFallback"}},
                   {{"type", "Fuse"}}};
  if (prefix) decoders.push_back({{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}});
  json tj = {{"version", "1.0"},
             {"added_tokens", added_tokens(v)},
             {"normalizer", normalizer},
             {"pre_tokenizer", nullptr},
             {"post_processor", template_processing(v, add_bos ? bos : -1, add_eos ? eos : -1)},
             {"decoder", {{"type", "Sequence"}, {"decoders", decoders}}},
             {"model",
              {{"type", "BPE"},
               {"dropout", nullptr},
               {"unk_token", unk >= 0 ? json(v.tokens[size_t(unk)]) : json(nullptr)},
               {"fuse_unk", true},
               {"byte_fallback", true}}}};
  json cfg = {{"add_bos_token", add_bos},
              {"add_eos_token", add_eos},
              {"clean_up_tokenization_spaces", false},
              {"legacy", true},
              {"tokenizer_class", "LlamaTokenizer"}};
  if (unk >= 0) cfg["unk_token"] = v.tokens[size_t(unk)];
  config_tokens(g, v, bos, eos, cfg);
  return {tokenizer_json(std::move(tj), v, spm_merges(g, v)), cfg.dump()};
}

json split(const char* regex) {
  return {{"type", "Split"},
          {"pattern", {{"Regex", regex}}},
          {"behavior", "Isolated"},
          {"invert", false}};
}
json byte_level(bool use_regex) {
  return {{"type", "ByteLevel"},
          {"add_prefix_space", false},
          {"trim_offsets", false},
          {"use_regex", use_regex}};
}

const char* kLlama3Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen2Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
    "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char* kQwen35Regex =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| "
    "?[^\\s\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

// A pre-tokenizer as tokenizer.json writes it: a Split by `regex` then byte-level (or, without
// a regex, individual digits then GPT-2's byte-level regex, or that regex alone), the
// normalizer, whether whole words found in the vocabulary skip the merges, and decoding's
// clean-up of spaces.
struct PreTokenizer {
  std::vector<const char*> names;  // tokenizer.ggml.pre values (llama.cpp's names)
  const char* regex;
  bool digits, nfc, ignore_merges, clean_spaces;
};

const PreTokenizer kPreTokenizers[] = {
    {{"llama-bpe", "llama3", "llama-v3"}, kLlama3Regex, false, false, true, true},
    {{"qwen2", "deepseek-r1-qwen"}, kQwen2Regex, false, true, false, false},
    {{"qwen35"}, kQwen35Regex, false, true, false, false},
    {{"smollm"}, nullptr, true, false, false, false},
    {{"gpt-2", "default"}, nullptr, false, false, false, true},
};

json pre_tokenizer_steps(const PreTokenizer& p) {
  const json steps = p.regex ? json{split(p.regex), byte_level(false)}
                     : p.digits
                         ? json{{{"type", "Digits"}, {"individual_digits", true}}, byte_level(true)}
                         : json();
  if (steps.is_null()) return byte_level(true);
  return {{"type", "Sequence"}, {"pretokenizers", steps}};
}

const PreTokenizer& pre_tokenizer(const GgufFile& g) {
  const std::string name = g.str("tokenizer.ggml.pre", "default");
  std::vector<std::string> known;
  for (const auto& p : kPreTokenizers)
    for (const char* n : p.names) {
      if (name == n) return p;
      known.push_back(n);
    }
  fail(g,
       fmt::format("tokenizer.ggml.pre '{}' is not supported ({})", name, fmt::join(known, ", ")));
}

TokenizerFiles bpe_files(const GgufFile& g) {
  const Vocab v = read_vocab(g);
  const PreTokenizer& pre = pre_tokenizer(g);
  const GgufValue& mg = g.array("tokenizer.ggml.merges");
  if (mg.elem != GgufType::String) fail(g, "tokenizer.ggml.merges is not an array of strings");
  Merges merges;
  merges.reserve(mg.strings.size());
  for (size_t i = 0; i < mg.strings.size(); ++i) {
    const std::string& m = mg.strings[i];
    const size_t sp = m.find(' ', 1);  // a token may start with a space, never hold one after
    if (sp == std::string::npos)
      fail(g,
           fmt::format("tokenizer.ggml.merges[{}] '{}' is not two tokens split by a space", i, m));
    merges.emplace_back(std::string_view(m).substr(0, sp), std::string_view(m).substr(sp + 1));
  }
  const int bos = token_id(g, v, "tokenizer.ggml.bos_token_id");
  const int eos = token_id(g, v, "tokenizer.ggml.eos_token_id");
  const bool add_bos = g.boolean("tokenizer.ggml.add_bos_token", false);
  const bool add_eos = g.boolean("tokenizer.ggml.add_eos_token", false);
  json tj = {{"version", "1.0"},
             {"added_tokens", added_tokens(v)},
             {"normalizer", pre.nfc ? json{{"type", "NFC"}} : json(nullptr)},
             {"pre_tokenizer", pre_tokenizer_steps(pre)},
             {"post_processor", template_processing(v, add_bos ? bos : -1, add_eos ? eos : -1)},
             {"decoder", byte_level(false)},
             {"model",
              {{"type", "BPE"},
               {"dropout", nullptr},
               {"unk_token", nullptr},
               {"fuse_unk", false},
               {"byte_fallback", false},
               {"ignore_merges", pre.ignore_merges}}}};
  json cfg = {{"add_bos_token", add_bos},
              {"add_eos_token", add_eos},
              {"clean_up_tokenization_spaces", pre.clean_spaces}};
  config_tokens(g, v, bos, eos, cfg);
  return {tokenizer_json(std::move(tj), v, merges), cfg.dump()};
}

}  // namespace

TokenizerFiles gguf_tokenizer_files(const GgufFile& g) {
  const std::string model = g.str("tokenizer.ggml.model");
  try {
    if (model == "llama") return spm_files(g);
    if (model == "gpt2") return bpe_files(g);
  } catch (const json::exception& e) {
    fail(g, fmt::format("tokenizer.ggml.*: {}", e.what()));
  }
  fail(g, fmt::format("tokenizer.ggml.model '{}' is not supported (llama, gpt2)", model));
}

}  // namespace krafla
