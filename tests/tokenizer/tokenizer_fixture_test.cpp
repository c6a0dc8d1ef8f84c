// Compares krafla::Tokenizer with the reference fixtures of gen_fixtures.mjs, id for id, on
// every text of texts.json: encode with and without special tokens and without parsing
// special-token text, decode (with and without skip_special), and streaming decode.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "krafla/error.h"
#include "krafla/model.h"
#include "krafla/tokenizer.h"
#include "tests/test_files.h"

namespace {

namespace fs = std::filesystem;

using krafla::test::read_file;

fs::path tokenizer_dir(const std::string& name) {
  return fs::path(KRAFLA_SOURCE_DIR) / ".models" / "tokenizers" / name;
}

std::string ids_str(const std::vector<int32_t>& v) {
  return fmt::format("[{}]", fmt::join(v, ","));
}

// The tokenizer.json of a fixture: the folder's file, or for a synthetic tokenizer that file with
// the fixture's model_additions (vocabulary entries, merges appended) and tokenizer_overrides
// (top-level keys replaced), as gen_fixtures.mjs builds it for the reference.
std::string fixture_tokenizer_json(const fs::path& dir, const nlohmann::json& fixture) {
  std::string text = read_file(dir / "tokenizer.json");
  if (!fixture.contains("tokenizer_overrides") && !fixture.contains("model_additions")) return text;
  auto j = nlohmann::json::parse(text);
  if (fixture.contains("model_additions")) {
    const auto& add = fixture["model_additions"];
    j["model"]["vocab"].update(add["vocab"]);
    for (const auto& m : add["merges"]) j["model"]["merges"].push_back(m);
  }
  if (fixture.contains("tokenizer_overrides")) j.update(fixture["tokenizer_overrides"]);
  return j.dump();
}

// Every case of a fixture against `tok`; `name` labels the failures.
void check_fixture(const std::string& name, const nlohmann::json& fixture,
                   const krafla::Tokenizer& tok, double load_ms) {
  fs::path here = fs::path(KRAFLA_SOURCE_DIR) / "tests" / "tokenizer";
  auto texts = nlohmann::json::parse(read_file(here / "texts.json"));
  ASSERT_EQ(fixture["count"].get<size_t>(), texts.size())
      << "texts.json changed since the fixtures were made: run node gen_fixtures.mjs";
  auto t1 = std::chrono::steady_clock::now();
  size_t passed = 0, shown = 0, n_nps = 0;
  const auto& cases = fixture["cases"];
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const auto& c = cases[i];
    auto want = c["ids"].get<std::vector<int32_t>>();
    auto want_plain = c["plain"].get<std::vector<int32_t>>();
    std::vector<std::string> errors;
    auto got = tok.encode(text, true);
    auto got_plain = tok.encode(text, false);
    if (got != want) errors.push_back(fmt::format("ids {} want {}", ids_str(got), ids_str(want)));
    if (got_plain != want_plain)
      errors.push_back(fmt::format("plain {} want {}", ids_str(got_plain), ids_str(want_plain)));
    // Special-token text as plain text (parse_special=false); absent when it equals plain.
    if (c.contains("plain_nps")) ++n_nps;
    auto want_nps = c.value("plain_nps", want_plain);
    auto got_nps = tok.encode(text, false, false);
    if (got_nps != want_nps)
      errors.push_back(fmt::format("plain_nps {} want {}", ids_str(got_nps), ids_str(want_nps)));
    // Absent decodes equal the text (decoded_skip) or decoded_skip (decoded_plain).
    const std::string want_skip = c.value("decoded_skip", text);
    const std::map<std::string, std::string> want_decode = {
        {"decoded", c["decoded"].get<std::string>()},
        {"decoded_skip", want_skip},
        {"decoded_plain", c.value("decoded_plain", want_skip)}};
    auto check_decode = [&](const std::vector<int32_t>& ids, bool skip, const char* key) {
      std::string d = tok.decode(ids, skip);
      if (d != want_decode.at(key))
        errors.push_back(fmt::format("{} '{}' want '{}'", key, d, want_decode.at(key)));
      krafla::Tokenizer::StreamDecoder sd(tok, skip);
      std::string s;
      for (int32_t id : ids) s += sd.push(id);
      s += sd.flush();
      if (s != d) errors.push_back(fmt::format("stream({}) '{}' != decode '{}'", key, s, d));
    };
    check_decode(want, false, "decoded");
    check_decode(want, true, "decoded_skip");
    check_decode(want_plain, false, "decoded_plain");
    if (errors.empty()) {
      ++passed;
    } else if (shown++ < 15) {
      ADD_FAILURE() << name << " text " << i << " '" << text
                    << "': " << fmt::format("{}", fmt::join(errors, "; "));
    }
  }
  auto t2 = std::chrono::steady_clock::now();
  auto ms = [](auto d) { return std::chrono::duration<double, std::milli>(d).count(); };
  std::printf("[ %-16s ] %zu/%zu texts match; load %.0f ms, encode+decode all %.1f ms\n",
              name.c_str(), passed, cases.size(), load_ms, ms(t2 - t1));
  EXPECT_EQ(passed, cases.size());
  // texts.json holds special-token texts of every family, so each fixture has some whose ids
  // change when they are not parsed; none would mean the fixtures lost the case.
  EXPECT_GT(n_nps, 0u) << "no text whose plain_nps ids differ from plain";
}

nlohmann::json load_fixture(const std::string& name) {
  fs::path here = fs::path(KRAFLA_SOURCE_DIR) / "tests" / "tokenizer";
  return nlohmann::json::parse(read_file(here / "fixtures" / (name + ".json")));
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, MatchesReference) {
  const std::string name = GetParam();
  auto fixture = load_fixture(name);
  fs::path dir = tokenizer_dir(fixture["tokenizer"].get<std::string>());
  if (!fs::exists(dir / "tokenizer.json"))
    GTEST_SKIP() << dir << "/tokenizer.json is missing: run scripts/fetch_tokenizers.sh";
  auto t0 = std::chrono::steady_clock::now();
  auto config = nlohmann::json::parse(read_file(dir / "tokenizer_config.json"));
  if (fixture.contains("config_overrides")) config.update(fixture["config_overrides"]);
  auto tok = krafla::Tokenizer::from_json(fixture_tokenizer_json(dir, fixture), config.dump());
  check_fixture(name, fixture, tok, ms_since(t0));
}

// The same fixtures read from vocabulary-only GGUF files (tests/tokenizer/make_gguf_vocabs.py,
// run by the ctest fixture tokenizer.gguf_vocabs into the build folder): the real tokenizers,
// and two byte-level ones whose pre-tokenizers are GGUF's `gpt-2` and `smollm`. The
// tokenizer.ggml.* keys must give the ids and text of the tokenizer.json they came from.
class GgufFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufFixtureTest, MatchesReference) {
  const std::string name = GetParam();
  auto fixture = load_fixture(name);
  fs::path file = fs::path(KRAFLA_BINARY_DIR) / "gguf-vocab" / (name + ".gguf");
  if (!fs::exists(file))
    GTEST_SKIP() << file << " is missing: ctest -R tokenizer.gguf_vocabs writes it";
  auto t0 = std::chrono::steady_clock::now();
  auto tok = krafla::load_tokenizer(file.string());
  check_fixture(name + ".gguf", fixture, tok, ms_since(t0));
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, GgufFixtureTest,
                         ::testing::Values("llama2", "llama3", "llama3_1", "qwen3", "qwen3_5",
                                           "gemma3", "gpt2_style", "smollm2_style"));

INSTANTIATE_TEST_SUITE_P(Tokenizers, FixtureTest,
                         ::testing::Values("llama2", "llama3", "llama3_1", "qwen3", "qwen3_5",
                                           "qwen3_5_marks", "gemma3", "llama2_nonlegacy",
                                           "gpt2_style", "smollm2_style", "bytelevel_prefix"));

// qwen3_5 is qwen3's vocabulary behind Qwen3.5's pre-tokenizer (combining marks stay with the
// letters before them); qwen3_5_marks adds merges that join a letter's token to a following
// mark's, which never fire under Qwen3's split (gen_fixtures.mjs checks it). The reference ids
// must differ from Qwen3's on texts of every script with such marks, or matching them would not
// show that krafla splits by the Qwen3.5 rule.
TEST(FixtureTest, Qwen35SplitsMarksUnlikeQwen3) {
  fs::path here = fs::path(KRAFLA_SOURCE_DIR) / "tests" / "tokenizer";
  auto texts = nlohmann::json::parse(read_file(here / "texts.json"));
  auto q3 = nlohmann::json::parse(read_file(here / "fixtures" / "qwen3.json"))["cases"];
  auto differ = [&](const char* name) {
    auto q35 = nlohmann::json::parse(read_file(here / "fixtures" / (std::string(name) + ".json")));
    std::vector<std::string> out;
    for (size_t i = 0; i < texts.size(); ++i)
      if (q3[i]["plain"] != q35["cases"][i]["plain"]) out.push_back(texts[i]);
    return out;
  };
  EXPECT_GE(differ("qwen3_5").size(), 10u) << "texts whose qwen3_5 ids are not Qwen3's";
  const auto marks = differ("qwen3_5_marks");
  EXPECT_GE(marks.size(), 30u) << "texts whose qwen3_5_marks ids are not Qwen3's";
  // Devanagari, Thai, Latin with combining marks, Arabic harakat, Hebrew niqqud, Tamil, and a
  // variation selector after a letter.
  for (const char* s : {"हिन्दी", "สวัสดี", "q\u0303", "بِسْمِ", "שָׁלוֹם", "தமிழ்", "a\ufe0f"})
    EXPECT_TRUE(std::any_of(marks.begin(), marks.end(),
                            [&](const std::string& t) { return t.find(s) != std::string::npos; }))
        << "no text with " << s << " is split differently";
}

}  // namespace
