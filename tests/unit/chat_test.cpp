// Chat templates against renderings made by the Jinja reference (chat/gen_chat_fixtures.mjs).
#include "krafla/chat.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "krafla/error.h"

namespace krafla {

TEST(Chat, MatchesJinjaRenderings) {
  std::ifstream f(std::string(KRAFLA_SOURCE_DIR) + "/tests/unit/chat/chat_fixtures.json");
  ASSERT_TRUE(f) << "chat_fixtures.json missing";
  const auto fixtures = nlohmann::json::parse(f);
  ASSERT_GE(fixtures.size(), 12u);
  // SmolLM3 writes today's date into its header: the generator renders it as this day.
  ::setenv("KRAFLA_CHAT_DATE", "02 December 2026", 1);
  std::map<std::string, int> per_template;
  for (const auto& fx : fixtures) {
    ++per_template[fx["template"].get<std::string>()];
    std::vector<ChatMessage> msgs;
    for (const auto& m : fx["messages"]) msgs.push_back({m["role"], m["content"]});
    const auto& t = chat_template(fx["template"].get<std::string>());
    EXPECT_EQ(t.render(msgs, fx["add_generation_prompt"].get<bool>()),
              fx["text"].get<std::string>())
        << "template " << fx["template"] << ", " << msgs.size() << " messages";
  }
  ::unsetenv("KRAFLA_CHAT_DATE");
  // Every template name is checked on the whole set of conversations (gemma: those it takes).
  for (const auto& name : chat_template_names())
    EXPECT_GE(per_template[name], name == "gemma" ? 5 : 10) << name << " renderings";
}

// The Qwen3.5 template raises on a conversation without a user query and on a system message
// that is not first; the renderer refuses them too.
TEST(Chat, Qwen35RefusesWhatTheTemplateRaises) {
  const auto& t = chat_template("qwen3.5");
  EXPECT_THROW(t.render({}, true), Error);
  EXPECT_THROW(t.render({{"system", "s"}}, true), Error);
  EXPECT_THROW(t.render({{"user", "<tool_response>x</tool_response>"}}, true), Error);
  EXPECT_THROW(t.render({{"user", "a"}, {"system", "late"}}, true), Error);
  EXPECT_EQ(t.render({{"user", " hi "}}, false), "<|im_start|>user\nhi<|im_end|>\n");
}

TEST(Chat, SmolLM3DateDefaultsToToday) {
  ::unsetenv("KRAFLA_CHAT_DATE");
  const std::string text = chat_template("smollm3").render({{"user", "hi"}}, true);
  char buf[64];
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  const std::string today(buf, std::strftime(buf, sizeof buf, "%d %B %Y", &tm));
  EXPECT_NE(text.find("Today Date: " + today + "\n"), std::string::npos) << text;
}

TEST(Chat, UnknownTemplateAndRoleAreErrors) {
  EXPECT_THROW(chat_template("nonesuch"), Error);
  try {
    chat_template("nonesuch");
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("llama3"), std::string::npos) << "lists known names";
  }
  EXPECT_THROW(chat_template("llama3").render({{"robot", "x"}}, true), Error);
}

TEST(Chat, StopTokensNamed) {
  EXPECT_EQ(chat_template("llama3").stop_tokens.front(), "<|eot_id|>");
  EXPECT_EQ(chat_template("zephyr").stop_tokens.front(), "</s>");
  EXPECT_EQ(chat_template("smollm3").stop_tokens.front(), "<|im_end|>");
  for (const char* name : {"qwen3.5", "qwen3.5-nothink"})
    EXPECT_EQ(chat_template(name).stop_tokens,
              (std::vector<std::string>{"<|im_end|>", "<|endoftext|>"}));
}

}  // namespace krafla
