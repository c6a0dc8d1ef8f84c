// ThinkFilter (ml_run --think hide) against a whole-text reference, for every way of cutting
// the reply into streamed pieces.
#include <gtest/gtest.h>

#include <regex>

#include "krafla/chat.h"

namespace krafla {
namespace {

// The reference on the whole reply: every <think>…</think> block and the newlines after it
// removed, and an unclosed block dropped to the end.
std::string hide_whole(const std::string& reply, bool in_think) {
  static const std::regex block("<think>[\\s\\S]*?(</think>\\n*|$)");
  return std::regex_replace((in_think ? "<think>" : "") + reply, block, "");
}

std::string stream(const std::vector<std::string>& pieces, bool in_think) {
  ThinkFilter f(in_think);
  std::string out;
  for (const auto& p : pieces) out += f.push(p);
  return out + f.flush();
}

const std::vector<std::string> kReplies = {
    "plain answer",
    "<think>\nreasoning\n</think>\n\nthe answer",
    "reasoning only\n</think>\n\nanswer",  // the prompt opened the block
    "a<think>b</think>c<think>d</think>\n\ne",
    "x < y and <thin> is not a tag; </think > neither",
    "<think>\ncut before the end",
    "ends with a partial tag <thi",
    "<<think>>x</think>\n",
    "</think>",
    "",
    "\n\n<think></think>\n\n\nanswer\n",
};

TEST(ThinkFilter, MatchesWholeTextForEveryCut) {
  for (bool in_think : {false, true}) {
    for (const auto& r : kReplies) {
      const std::string want = hide_whole(r, in_think);
      EXPECT_EQ(stream({r}, in_think), want) << "'" << r << "' in one piece, in_think " << in_think;
      std::vector<std::string> bytes;
      for (char c : r) bytes.emplace_back(1, c);
      EXPECT_EQ(stream(bytes, in_think), want) << "'" << r << "' byte by byte";
      for (size_t i = 0; i <= r.size(); ++i)
        for (size_t j = i; j <= r.size(); ++j)
          ASSERT_EQ(stream({r.substr(0, i), r.substr(i, j - i), r.substr(j)}, in_think), want)
              << "'" << r << "' cut at " << i << " and " << j << ", in_think " << in_think;
    }
  }
}

TEST(ThinkFilter, KnownReplies) {
  EXPECT_EQ(stream({"reason", "ing\n</th", "ink>\n", "\nThe", " answer."}, true), "The answer.");
  EXPECT_EQ(stream({"<think>\nhm\n</think>\n\n", "Hi"}, false), "Hi");
  EXPECT_EQ(stream({"no tags <", "b>bold</b>"}, false), "no tags <b>bold</b>");
  EXPECT_EQ(stream({"keep <thi"}, false), "keep <thi");  // a partial tag at the end is text
  ThinkFilter cut(true);
  EXPECT_EQ(cut.push("still thinking </thi") + cut.flush(), "");
  EXPECT_TRUE(cut.in_think());
  ThinkFilter done(true);
  EXPECT_EQ(done.push("r</think>\n\nA"), "A");
  EXPECT_FALSE(done.in_think());
}

TEST(ThinkFilter, PromptOpensThink) {
  for (const char* name : {"qwen3.5", "qwen3.5-nothink", "qwen3", "chatml"}) {
    const std::string p = chat_template(name).render({{"user", "hi"}}, true);
    EXPECT_EQ(ThinkFilter::prompt_opens_think(p), std::string(name) == "qwen3.5") << name;
  }
  EXPECT_FALSE(ThinkFilter::prompt_opens_think(""));
  EXPECT_TRUE(ThinkFilter::prompt_opens_think("x<think>\n"));
  EXPECT_FALSE(ThinkFilter::prompt_opens_think("<think>\n</think>\n\n"));
}

}  // namespace
}  // namespace krafla
