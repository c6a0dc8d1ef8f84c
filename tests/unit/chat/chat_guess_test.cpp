// guess_chat_template (src/chat/guess.cpp) on the real tokenizers' chat templates and on the
// cases of tools/convert/tokenizer.py's rules, which it must name alike (the converter records
// the name in a .mlb; a GGUF's template text is guessed at load).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <unordered_set>

#include "chat/guess.h"
#include "tests/test_files.h"

namespace krafla {
namespace {

namespace fs = std::filesystem;

std::string guess(const std::string& tmpl, std::unordered_set<std::string> vocab = {},
                  size_t n = 0) {
  return guess_chat_template(
      tmpl, [&](std::string_view s) { return vocab.count(std::string(s)) > 0; }, n);
}

TEST(ChatGuess, Rules) {
  EXPECT_EQ(guess("{{ '<|im_start|>' + m.role }}"), "chatml");
  EXPECT_EQ(guess("{{- '<|im_start|>system\\nYou are a helpful assistant.' }}<|im_start|>"), "");
  EXPECT_EQ(guess("<|im_start|>system\\n{{ x }}"), "chatml");  // an expression, not a prompt
  EXPECT_EQ(guess("<|im_start|> You are Qwen, created by Alibaba Cloud."), "qwen");
  EXPECT_EQ(guess("<|im_start|> <think> enable_thinking"), "qwen3");
  EXPECT_EQ(guess("<|im_start|> <function= reasoning_content '<think>\\n'"), "qwen3.5");
  EXPECT_EQ(guess("<|im_start|> Knowledge Cutoff Date"), "smollm3");
  EXPECT_EQ(guess("<|start_header_id|>"), "llama3");
  EXPECT_EQ(guess("", {"<|start_header_id|>"}), "llama3");
  EXPECT_EQ(guess("<|user|>"), "zephyr");
  EXPECT_EQ(guess("<start_of_turn>user"), "gemma");
  EXPECT_EQ(guess("[INST] x [/INST]"), "llama2");
  EXPECT_EQ(guess("", {"<s>", "</s>", "\u2581"}, 32000), "llama2");
  EXPECT_EQ(guess("", {"<s>", "</s>", "\u2581"}, 32001), "");
  EXPECT_EQ(guess("{{ messages }}"), "");
}

TEST(ChatGuess, RealTemplates) {
  const fs::path toks = fs::path(KRAFLA_SOURCE_DIR) / ".models" / "tokenizers";
  for (auto [name, want] : {std::pair{"llama3", "llama3"},
                            {"qwen3", "qwen3"},
                            {"gemma3", "gemma"},
                            {"qwen3_5", "qwen3.5"}}) {
    const fs::path cfg = toks / name / "tokenizer_config.json";
    if (!fs::exists(cfg)) GTEST_SKIP() << cfg << " is missing: run scripts/fetch_tokenizers.sh";
    const auto j = nlohmann::json::parse(test::read_file(cfg));
    EXPECT_EQ(guess(j.value("chat_template", "")), want) << name;
  }
  const std::string q35 =
      test::read_file(fs::path(KRAFLA_SOURCE_DIR) / "tests/unit/chat/qwen3_5.jinja");
  EXPECT_EQ(guess(q35), "qwen3.5");
  // Llama 3.1's own template (the npm tokenizer above carries Llama 3's); Llama 3.2's differs
  // in dating its system turn today.
  const std::string l31 =
      test::read_file(fs::path(KRAFLA_SOURCE_DIR) / "tests/unit/chat/llama3_1.jinja");
  EXPECT_EQ(guess(l31), "llama3.1");
  EXPECT_EQ(guess("{%- if strftime_now is defined %}" + l31), "llama3");
  const std::string q25 =
      test::read_file(fs::path(KRAFLA_SOURCE_DIR) / "tests/unit/chat/qwen2_5.jinja");
  EXPECT_EQ(guess(q25), "qwen");
}

}  // namespace
}  // namespace krafla
