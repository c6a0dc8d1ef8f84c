// Behaviour that the reference fixtures do not pin down: errors, special ids, streaming of
// partial UTF-8, and the Unicode helpers.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "krafla/error.h"
#include "krafla/tokenizer.h"
#include "tests/read_file.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/split_patterns.h"
#include "tokenizer/unicode.h"

namespace {

namespace fs = std::filesystem;
using krafla::Tokenizer;

using krafla::test::read_file;

// Loads .models/tokenizers/NAME once per process; nullptr when the files are absent.
const Tokenizer* load(const std::string& name) {
  static std::map<std::string, std::unique_ptr<Tokenizer>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second.get();
  fs::path dir = fs::path(KRAFLA_SOURCE_DIR) / ".models" / "tokenizers" / name;
  std::unique_ptr<Tokenizer> t;
  if (fs::exists(dir / "tokenizer.json"))
    t = std::make_unique<Tokenizer>(Tokenizer::from_json(read_file(dir / "tokenizer.json"),
                                                         read_file(dir / "tokenizer_config.json")));
  return (cache[name] = std::move(t)).get();
}

#define LOAD_OR_SKIP(var, name)                 \
  const Tokenizer* var = load(name);            \
  if (!var)                                     \
  GTEST_SKIP() << ".models/tokenizers/" << name \
               << " is missing: run scripts/"   \
                  "fetch_tokenizers.sh"

bool valid_utf8(const std::string& s) {
  return krafla::unicode::complete_prefix(s) == s.size() && krafla::unicode::repair_utf8(s) == s;
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const krafla::Error& e) {
    return e.what();
  }
  return "(no error)";
}

const char* kTinyModel =
    R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "c": 2, "ab": 3, "abc": 4, "<0x7A>": 5},
        "merges": MERGES, "byte_fallback": true},
        "added_tokens": [{"id": 6, "content": "<eot>", "special": true}],
        "pre_tokenizer": PRE, "decoder": {"type": "ByteFallback"}})";

std::string tiny(const std::string& merges, const std::string& pre = "null") {
  std::string s = kTinyModel;
  s.replace(s.find("MERGES"), 6, merges);
  s.replace(s.find("PRE"), 3, pre);
  return s;
}

TEST(Tokenizer, TinyBpeBothMergeForms) {
  for (const char* merges : {R"(["a b", "ab c"])", R"([["a", "b"], ["ab", "c"]])"}) {
    auto t = Tokenizer::from_json(tiny(merges), "");
    EXPECT_EQ(t.encode("abcab"), (std::vector<int32_t>{4, 3}));
    EXPECT_EQ(t.encode("za<eot>b"), (std::vector<int32_t>{5, 0, 6, 1}));  // byte fallback
    EXPECT_EQ(t.vocab_size(), 7);
    EXPECT_TRUE(t.is_special(6));
    EXPECT_FALSE(t.is_special(0));
    EXPECT_EQ(t.token_id("ab"), 3);
    EXPECT_EQ(t.token_id("zz"), std::nullopt);
    EXPECT_EQ(t.bos_id(), -1);
    EXPECT_EQ(t.decode(std::vector<int32_t>{5, 4, 6}, true), "zabc");
  }
}

// The pre-0.19 SentencePiece form: Metaspace pre-tokenizer and decoder instead of normalizers.
TEST(Tokenizer, MetaspaceForm) {
  std::string json = R"({"model": {"type": "BPE", "vocab": {"\u2581": 0, "a": 1, "b": 2,
      "\u2581a": 3, "\u2581b": 4, "<s>": 5}, "merges": ["\u2581 a", "\u2581 b"]},
      "added_tokens": [{"id": 5, "content": "<s>", "special": true}],
      "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
      "decoder": {"type": "Metaspace", "replacement": "\u2581", "add_prefix_space": true},
      "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>",
      "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]}})";
  auto t = Tokenizer::from_json(json, R"({"bos_token": {"content": "<s>"}})");
  EXPECT_EQ(t.encode("a b"), (std::vector<int32_t>{5, 3, 4}));
  EXPECT_EQ(t.encode("a  b", false), (std::vector<int32_t>{3, 0, 4}));
  EXPECT_EQ(t.decode(std::vector<int32_t>{3, 0, 4}), "a  b");
  EXPECT_EQ(t.decode(std::vector<int32_t>{5, 3, 4}, true), "a b");
  EXPECT_EQ(t.bos_id(), 5);
}

TEST(SplitPattern, SpelledOutCaseGroupIsTheSamePattern) {
  auto p = krafla::tok::SplitPattern::from_regex(
      R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)");
  EXPECT_EQ(p->find_all("I'M").size(), 2u);
}

TEST(Tokenizer, UnknownPiecesAreRefusedByName) {
  std::string e = error_of([] {
    Tokenizer::from_json(tiny("[]", R"({"type": "Split", "pattern": {"Regex": "\\w+"}})"), "");
  });
  EXPECT_NE(e.find("unsupported pre-tokenizer Split regex '\\w+'"), std::string::npos) << e;
  e = error_of([] { Tokenizer::from_json(tiny("[]", R"({"type": "Whitespace"})"), ""); });
  EXPECT_NE(e.find("'Whitespace'"), std::string::npos) << e;
  e = error_of([] { Tokenizer::from_json("{not json", ""); });
  EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
}

TEST(Tokenizer, OutOfRangeIdThrows) {
  auto t = Tokenizer::from_json(tiny("[]"), "");
  EXPECT_EQ(error_of([&] { t.decode(std::vector<int32_t>{7}); }),
            "token id 7 is outside the vocabulary (size 7)");
  EXPECT_EQ(error_of([&] { t.token_text(-1); }), "token id -1 is outside the vocabulary (size 7)");
  Tokenizer::StreamDecoder sd(t);
  EXPECT_EQ(error_of([&] { sd.push(100); }), "token id 100 is outside the vocabulary (size 7)");
}

TEST(Tokenizer, SpecialIdsFromConfig) {
  struct Want {
    const char* name;
    int32_t bos, eos, vocab;
  };
  for (Want w : {Want{"llama2", 1, 2, 32000}, Want{"llama3", 128000, 128001, 128256},
                 Want{"llama3_1", 128000, 128009, 128256}, Want{"qwen3", -1, 151645, 151669},
                 Want{"gemma3", 2, 106, 262145}}) {
    const Tokenizer* t = load(w.name);
    if (!t) continue;
    EXPECT_EQ(t->bos_id(), w.bos) << w.name;
    EXPECT_EQ(t->eos_id(), w.eos) << w.name;
    EXPECT_EQ(t->vocab_size(), w.vocab) << w.name;
    if (w.bos >= 0) {
      EXPECT_TRUE(t->is_special(w.bos)) << w.name;
    }
  }
}

// Each push returns valid UTF-8; a character split over byte tokens comes out whole.
void expect_stream_holds_back(const Tokenizer& t, const std::string& text) {
  auto ids = t.encode(text, false);
  Tokenizer::StreamDecoder sd(t);
  std::string all;
  int empty_pushes = 0;
  for (int32_t id : ids) {
    std::string piece = sd.push(id);
    EXPECT_TRUE(valid_utf8(piece)) << text;
    empty_pushes += piece.empty();
    all += piece;
  }
  all += sd.flush();
  EXPECT_EQ(all, t.decode(ids));
  EXPECT_GT(empty_pushes, 0) << text << ": expected a character split over several tokens";
}

TEST(Tokenizer, StreamHoldsBackPartialCharactersLlama2) {
  LOAD_OR_SKIP(t, "llama2");
  expect_stream_holds_back(*t, "\xF0\x9F\x98\x80 \xF0\x9D\x94\x98");  // 😀 𝔘 via <0xNN>
  Tokenizer::StreamDecoder sd(*t);
  EXPECT_EQ(sd.push(*t->token_id("<0xF0>")), "");
  EXPECT_EQ(sd.flush(), "\xEF\xBF\xBD");  // an unfinished character becomes U+FFFD
}

TEST(Tokenizer, StreamHoldsBackPartialCharactersByteLevel) {
  LOAD_OR_SKIP(t, "llama3");
  expect_stream_holds_back(*t, "\xF0\x9D\x94\x98\xF0\x9D\x94\xAB\xF0\x9F\xA6\x8E");
}

TEST(Tokenizer, LeadingSpaceStrippedOnlyAtStart) {
  LOAD_OR_SKIP(t, "llama2");
  auto ids = t->encode("Hello world", false);
  EXPECT_EQ(t->decode(ids), "Hello world");
  std::vector<int32_t> twice = ids;
  twice.insert(twice.end(), ids.begin(), ids.end());
  EXPECT_EQ(t->decode(twice), "Hello world Hello world");
}

// parse_special=false leaves special tokens to the model but still cuts out added tokens that
// are not special (Qwen3's <think>), as the Rust library's encode_special_tokens does.
TEST(Tokenizer, NoParseSpecialKeepsPlainAddedTokens) {
  LOAD_OR_SKIP(t, "qwen3");
  const int32_t think = *t->token_id("<think>"), im_end = *t->token_id("<|im_end|>");
  ASSERT_FALSE(t->is_special(think));
  ASSERT_TRUE(t->is_special(im_end));
  const auto has = [](const std::vector<int32_t>& v, int32_t id) {
    return std::find(v.begin(), v.end(), id) != v.end();
  };
  const auto parsed = t->encode("<think>hi<|im_end|>", false);
  EXPECT_TRUE(has(parsed, think) && has(parsed, im_end));
  const auto plain = t->encode("<think>hi<|im_end|>", false, false);
  EXPECT_TRUE(has(plain, think));
  EXPECT_FALSE(has(plain, im_end));
  EXPECT_EQ(t->decode(plain), "<think>hi<|im_end|>");
}

// A piece is the token's own bytes: a byte-level text's pieces concatenate to its decode, and
// SentencePiece's "▁" is a space even on the first token, where decode strips it.
TEST(Tokenizer, PiecesAreTheTokensBytes) {
  LOAD_OR_SKIP(b, "llama3");
  const std::string text = "Hello world, \xF0\x9F\x98\x80 caf\xC3\xA9";
  std::string joined;
  for (int32_t id : b->encode(text, false)) joined += b->piece(id);
  EXPECT_EQ(joined, text);
  LOAD_OR_SKIP(s, "llama2");
  EXPECT_EQ(s->piece(*s->token_id("\u2581Hello")), " Hello");
  EXPECT_EQ(s->piece(*s->token_id("<0xF0>")), "\xF0");
  EXPECT_EQ(s->piece(*s->token_id("<s>")), "<s>");
  EXPECT_EQ(s->kind(), "BPE with byte fallback");
  EXPECT_EQ(b->kind(), "byte-level BPE");
}

TEST(Unicode, Nfc) {
  using krafla::unicode::nfc;
  EXPECT_EQ(nfc("cafe\xCC\x81"), "caf\xC3\xA9");
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // Hangul L V T
  // a + acute + dot below: reordered, then dot below composes first (U+1EA1) and acute stays.
  EXPECT_EQ(nfc("a\xCC\x81\xCC\xA3"), "\xE1\xBA\xA1\xCC\x81");
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");  // ANGSTROM SIGN -> Å (singleton)
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
}

TEST(Unicode, RepairUtf8LikeTextDecoder) {
  using krafla::unicode::repair_utf8;
  EXPECT_EQ(repair_utf8("a\xF0\x9F"
                        "b"),
            "a\xEF\xBF\xBD"
            "b");  // one U+FFFD per maximal part
  EXPECT_EQ(repair_utf8("\xC0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(repair_utf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate
  EXPECT_EQ(krafla::unicode::complete_prefix("ab\xE2\x82"), 2u);
}

std::vector<std::string> pieces(const std::string& regex, const std::string& text) {
  auto p = krafla::tok::SplitPattern::from_regex(regex);
  std::vector<std::string> out;
  for (auto [a, b] : p->find_all(text)) out.push_back(text.substr(a, b - a));
  return out;
}

TEST(SplitPattern, Llama3AndQwen2) {
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  EXPECT_EQ(
      pieces(llama3, "HE'S 12345 ok!!\n\n  x  "),
      (std::vector<std::string>{"HE", "'S", " ", "123", "45", " ok", "!!\n\n", " ", " x", "  "}));
  std::string qwen2 = llama3;
  qwen2.replace(qwen2.find("{1,3}"), 5, "");
  EXPECT_EQ(pieces(qwen2, "a 123"), (std::vector<std::string>{"a", " ", "1", "2", "3"}));
  EXPECT_EQ(pieces(R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)",
                   "It's  42!"),
            (std::vector<std::string>{"It", "'s", " ", " 42", "!"}));
}

std::vector<std::string> pre_split(const std::string& json, const std::string& text) {
  return krafla::tok::PreTokenizer::from_json(nlohmann::json::parse(json))->split({text}, 0);
}

TEST(PreTokenizer, Digits) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pre_split(R"({"type": "Digits", "individual_digits": true})", "ab12 3c"),
            (V{"ab", "1", "2", " ", "3", "c"}));
  EXPECT_EQ(pre_split(R"({"type": "Digits", "individual_digits": false})", "ab12 3c"),
            (V{"ab", "12", " ", "3", "c"}));
  // Only ASCII digits, as in the reference (Hugging Face would split these too).
  EXPECT_EQ(pre_split(R"({"type": "Digits", "individual_digits": true})", "①②٣٤"), (V{"①②٣٤"}));
  EXPECT_EQ(pre_split(R"({"type": "Digits", "individual_digits": true})", ""), V{});
}

// SmolLM2's pre-tokenizer, and the prefix space that ByteLevel puts on every word it gets.
TEST(PreTokenizer, DigitsThenByteLevel) {
  using V = std::vector<std::string>;
  EXPECT_EQ(pre_split(R"({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": true},
                {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true,
                 "use_regex": true}]})",
                      "x 42!  y's"),
            (V{"x", "\u0120", "4", "2", "!", "\u0120", "\u0120y", "'s"}));
  EXPECT_EQ(pre_split(R"({"type": "Sequence", "pretokenizers": [
                {"type": "Digits", "individual_digits": false},
                {"type": "ByteLevel", "add_prefix_space": true, "use_regex": true}]})",
                      "a12 b"),
            (V{"\u0120a", "\u012012", "\u0120b"}));
  EXPECT_EQ(pre_split(R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
                      "a\n\nb   c "),
            (V{"a", "\u010a", "\u010a", "b", "\u0120\u0120", "\u0120c", "\u0120"}));
}

TEST(PreTokenizer, UnknownFieldsAreRefusedByName) {
  std::string e = error_of([] {
    krafla::tok::PreTokenizer::from_json(
        nlohmann::json::parse(R"({"type": "Digits", "individual_digits": true, "x": 1})"));
  });
  EXPECT_EQ(e, "tokenizer.json: unsupported field 'x' of the Digits pre-tokenizer");
  e = error_of([] {
    krafla::tok::PreTokenizer::from_json(
        nlohmann::json::parse(R"({"type": "ByteLevel", "split_digits": true})"));
  });
  EXPECT_EQ(e, "tokenizer.json: unsupported field 'split_digits' of the ByteLevel pre-tokenizer");
}

}  // namespace
