// TokenFilter against a brute-force check of every token (JsonMatcher::can_accept), random
// walks through the allowed tokens, and the speed of apply() on the Qwen3 vocabulary.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "json_test_util.h"
#include "krafla/json_constraint.h"
#include "krafla/tokenizer.h"
#include "tests/read_file.h"

namespace krafla {
namespace {

using json_test::ojson;
using json_test::validate;

// Every single byte (so no state is a dead end for lack of a token), then multi-byte pieces:
// structure, keys, literals split in two, escapes, UTF-8 whole and split across tokens, and
// pieces that mix string content with a closing quote or control bytes.
std::vector<std::string> vocabulary() {
  std::vector<std::string> v;
  for (int c = 0; c < 256; ++c) v.push_back(std::string(1, char(c)));
  for (const char* p : {"  ",       "\n  ",     "\n    ",       "{\"",
                        "\":",      "\": ",     "\",",          "\"}",
                        "\"]",      ", \"",     "\",\"",        "na",
                        "me",       "name",     "id",           "tags",
                        "sku",      "qty",      "status",       "new",
                        "paid",     "order",    "kind",         "items",
                        "note",     "price",    "extra",        "gift",
                        "12",       "00",       "1.5",          "e+",
                        "true",     "false",    "null",         "tr",
                        "ue",       "nu",       "ll",           "fal",
                        "se",       "ab",       "abc",          "hello world",
                        "\\n",      "\\\"",     "\\u",          "e9",
                        "D83D",     "DE00",     "\\uD83D",      "\\uDE00",
                        "\xC3\xA9", "\xE4\xB8", "\xE4\xB8\xAD", "\xF0\x9F\x98\x80",
                        "\xF0\x9F", "\x98\x80", "\xB8\xAD",     "a\xC3",
                        "\"\n",     "}\n",      "\"name\":",    " \"",
                        "[{",       "}]",       "},{",          "ab\"",
                        "x\"y",     "a\"}",     "1,",           "1}",
                        "]}",       "\"},",     "\t\t",         "a\tb",
                        ":\"",      "\":\"",    "\"id\":",      "\"sku\":\"",
                        "<|eos|>"})
    v.push_back(p);
  v.push_back("");  // a token without bytes (say a special one): never allowed
  return v;
}

std::vector<int32_t> brute_force(const JsonMatcher& m, const std::vector<std::string>& pieces) {
  std::vector<int32_t> out;
  for (int32_t id = 0; id < int32_t(pieces.size()); ++id)
    if (!pieces[id].empty() && m.can_accept(pieces[id])) out.push_back(id);
  return out;
}

TEST(JsonTokenFilterTest, AllowedMatchesBruteForceAtEveryByte) {
  const std::vector<std::string> pieces = vocabulary();
  const TokenFilter filter(pieces);
  EXPECT_EQ(filter.n_tokens(), int32_t(pieces.size()));
  const std::vector<std::pair<JsonSchema, std::string>> cases = {
      {JsonSchema::any_object(),
       "{\"a\": [1, -2.5e+3, true, null, {\"b\": \"x\\\"\\u00e9\\uD83D\\uDE00\xE4\xB8\xAD\"}],\n"
       "  \"name\" : \"hello world\"}"},
      {JsonSchema::parse_text(json_test::kOrderSchema),
       R"({"id":12,"status":"paid","note":"h\u00e9 x","items":[{"sku":"ab","qty":1,"gift":false}],"kind":"order","tags":["a","b"],"extra":null})"},
      {JsonSchema::parse_text(json_test::kOrderSchema),
       "{ \"id\": -1, \"status\": 7, \"note\": \"\xE4\xB8\xAD\xF0\x9F\x98\x80\", \"price\": 0.5, "
       "\"items\": [ {\"sku\": \"xy\", \"qty\": 0} ], \"kind\": \"order\" }"},
      {JsonSchema::parse_text(R"({"type":"string","maxLength":3})"), "\"a\xC3\xA9\\n\""},
  };
  int states = 0;
  for (const auto& [schema, doc] : cases) {
    JsonMatcher m(schema);
    for (size_t i = 0; i <= doc.size(); ++i) {
      ASSERT_EQ(filter.allowed(m), brute_force(m, pieces)) << "after " << doc.substr(0, i);
      ++states;
      if (i < doc.size()) {
        ASSERT_TRUE(m.accept(doc.substr(i, 1))) << doc.substr(0, i + 1);
      }
    }
    EXPECT_TRUE(m.done());
    EXPECT_TRUE(filter.allowed(m).empty());
  }
  EXPECT_GT(states, 300);
}

TEST(JsonTokenFilterTest, ApplyKeepsTheEndIdsExactlyWhenDone) {
  const std::vector<std::string> pieces = vocabulary();
  const TokenFilter filter(pieces);
  const int32_t n = int32_t(pieces.size());
  const int32_t eos = n - 2;  // "<|eos|>": an ordinary piece, plain string text
  ASSERT_EQ(pieces[eos], "<|eos|>");
  const int32_t pad_end = n + 1;  // an end id in the padding rows past the vocabulary
  const std::vector<int32_t> ends = {eos, pad_end};
  const JsonSchema obj = JsonSchema::any_object();

  auto run = [&](const JsonMatcher& m, std::vector<float>& logits) {
    logits.assign(size_t(n + 3), 1.0f);
    return filter.apply(m, logits, ends);
  };
  std::vector<float> logits;
  JsonMatcher m(obj);
  size_t kept = run(m, logits);
  EXPECT_EQ(kept, filter.allowed(m).size());
  EXPECT_EQ(logits['{'], 1.0f);
  EXPECT_TRUE(std::isinf(logits['[']));
  EXPECT_TRUE(std::isinf(logits[eos]) && std::isinf(logits[pad_end]) && std::isinf(logits[n]));
  EXPECT_TRUE(std::isinf(logits[n - 1]));  // the empty piece

  ASSERT_TRUE(m.accept("{\"a\":\"x"));
  ASSERT_TRUE(m.can_accept(pieces[eos]));  // the matcher would take it, but it ends the text
  run(m, logits);
  EXPECT_TRUE(std::isinf(logits[eos]));
  EXPECT_EQ(logits['y'], 1.0f);

  ASSERT_TRUE(m.accept("\"}"));
  ASSERT_TRUE(m.done());
  kept = run(m, logits);
  EXPECT_EQ(kept, 2u);
  for (int32_t id = 0; id < int32_t(logits.size()); ++id)
    EXPECT_EQ(std::isinf(logits[id]), id != eos && id != pad_end) << id;
}

// Random walks through the allowed tokens (end ids aside) until done: for a schema whose
// strings, arrays and numbers are all bounded they always end, and the text validates.
TEST(JsonTokenFilterTest, RandomWalksTerminateAndValidate) {
  const std::vector<std::string> pieces = vocabulary();
  const TokenFilter filter(pieces);
  const ojson schema = ojson::parse(json_test::kOrderSchema);
  const JsonSchema s = JsonSchema::parse(schema);
  constexpr int kMaxSteps = 5000;  // a loose bound: whitespace runs, 12-byte escapes...
  std::mt19937 rng(7);
  int longest = 0;
  for (int walk = 0; walk < 100; ++walk) {
    JsonMatcher m(s);
    std::string text;
    int steps = 0;
    while (!m.done()) {
      const std::vector<int32_t> allowed = filter.allowed(m);
      ASSERT_FALSE(allowed.empty()) << "dead end after " << text;
      ASSERT_LT(++steps, kMaxSteps) << text;
      const std::string& piece = pieces[allowed[rng() % allowed.size()]];
      ASSERT_TRUE(m.accept(piece));
      text += piece;
    }
    longest = std::max(longest, steps);
    ASSERT_TRUE(nlohmann::json::accept(text)) << text;
    EXPECT_TRUE(validate(nlohmann::json::parse(text), schema)) << text;
  }
  std::printf("random walks: the longest took %d tokens\n", longest);
}

// json_object mode has no bound (free strings): walks stop after a while, and those that end
// parse as an object.
TEST(JsonTokenFilterTest, RandomWalksInJsonObjectModeParse) {
  const std::vector<std::string> pieces = vocabulary();
  const TokenFilter filter(pieces);
  const JsonSchema obj = JsonSchema::any_object();
  std::mt19937 rng(11);
  int finished = 0;
  for (int walk = 0; walk < 200; ++walk) {
    JsonMatcher m(obj);
    std::string text;
    for (int steps = 0; steps < 300 && !m.done(); ++steps) {
      const std::vector<int32_t> allowed = filter.allowed(m);
      ASSERT_FALSE(allowed.empty()) << "dead end after " << text;
      // favour structure so that some walks end: pick a short token half of the time
      std::vector<int32_t> pick = allowed;
      if (rng() % 2) {
        std::vector<int32_t> structural;
        for (int32_t id : allowed)
          if (pieces[id].find_first_of("{}[]\",:") != std::string::npos) structural.push_back(id);
        if (!structural.empty()) pick = structural;
      }
      const std::string& piece = pieces[pick[rng() % pick.size()]];
      ASSERT_TRUE(m.accept(piece));
      text += piece;
    }
    if (!m.done()) continue;
    ++finished;
    ASSERT_TRUE(nlohmann::json::accept(text)) << text;
    EXPECT_TRUE(nlohmann::json::parse(text).is_object()) << text;
  }
  EXPECT_GT(finished, 20);
}

using krafla::test::read_file;

const Tokenizer* qwen3() {
  static std::unique_ptr<Tokenizer> tok = [] {
    const auto dir = std::filesystem::path(KRAFLA_SOURCE_DIR) / ".models/tokenizers/qwen3";
    if (!std::filesystem::exists(dir / "tokenizer.json")) return std::unique_ptr<Tokenizer>();
    return std::make_unique<Tokenizer>(Tokenizer::from_json(
        read_file(dir / "tokenizer.json"), read_file(dir / "tokenizer_config.json")));
  }();
  return tok.get();
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The real vocabulary: allowed() equals the brute-force check at typical states, special
// tokens are never allowed, and apply()'s time per step is printed (not asserted: the machines
// that run the tests vary).
TEST(JsonTokenFilterTest, Qwen3VocabularyMatchesBruteForceAndTimesApply) {
  const Tokenizer* tok = qwen3();
  if (!tok) GTEST_SKIP() << ".models/tokenizers/qwen3 is missing: run scripts/fetch_tokenizers.sh";
  auto t0 = std::chrono::steady_clock::now();
  const TokenFilter filter(*tok);
  std::printf("TokenFilter over %d tokens built in %.1f ms\n", filter.n_tokens(), ms_since(t0));
  std::vector<std::string> pieces(size_t(tok->vocab_size()));
  for (int32_t id = 0; id < tok->vocab_size(); ++id)
    if (!tok->is_special(id)) pieces[id] = tok->piece(id);
  const int32_t im_end = tok->token_id("<|im_end|>").value_or(-1);
  ASSERT_GE(im_end, 0);
  const std::vector<int32_t> ends = {im_end};

  const JsonSchema obj = JsonSchema::any_object();
  const JsonSchema schema = JsonSchema::parse_text(json_test::kOrderSchema);
  const std::vector<std::tuple<const char*, const JsonSchema*, std::string>> states = {
      {"start", &obj, ""},
      {"after {", &obj, "{"},
      {"in a key", &obj, "{\"na"},
      {"after a key", &obj, "{\"name\""},
      {"after :", &obj, "{\"name\": "},
      {"in a string", &obj, "{\"name\": \"hello"},
      {"mid UTF-8", &obj, "{\"name\": \"\xE4"},
      {"in an escape", &obj, "{\"name\": \"\\"},
      {"in a number", &obj, "{\"name\": 12"},
      {"after a value", &obj, "{\"name\": 1"},
      {"schema: start", &schema, ""},
      {"schema: a key", &schema, "{\"id\":1,\""},
      {"schema: enum", &schema, "{\"id\":1,\"status\":\""},
      {"schema: maxLength", &schema, "{\"id\":1,\"status\":\"new\",\"note\":\"ab"},
      {"done", &obj, "{}"},
  };
  std::vector<float> logits(size_t(tok->vocab_size()));
  double worst = 0;
  for (const auto& [name, s, prefix] : states) {
    JsonMatcher m(*s);
    ASSERT_TRUE(m.accept(prefix)) << name;
    const std::vector<int32_t> allowed = filter.allowed(m);
    ASSERT_EQ(allowed, brute_force(m, pieces)) << name;
    for (int32_t id : allowed) ASSERT_FALSE(tok->is_special(id)) << name;
    constexpr int kReps = 20;
    t0 = std::chrono::steady_clock::now();
    size_t kept = 0;
    for (int r = 0; r < kReps; ++r) kept = filter.apply(m, logits, ends);
    const double ms = ms_since(t0) / kReps;
    worst = std::max(worst, ms);
    std::printf("  apply %-18s %7zu allowed  %7.3f ms\n", name, kept, ms);
  }
  std::printf("  apply: slowest state %.3f ms\n", worst);
}

}  // namespace
}  // namespace krafla
