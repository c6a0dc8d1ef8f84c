// Chat templates against renderings made by the Jinja reference (chat/gen_chat_fixtures.mjs).
#include <gtest/gtest.h>

#include <cstdlib>
#include <ctime>
#include <fstream>
#include <nlohmann/json.hpp>

#include "krafla/chat.h"
#include "krafla/error.h"

namespace krafla {

TEST(Chat, MatchesJinjaRenderings) {
  std::ifstream f(std::string(KRAFLA_SOURCE_DIR) + "/tests/unit/chat/chat_fixtures.json");
  ASSERT_TRUE(f) << "chat_fixtures.json missing";
  const auto fixtures = nlohmann::json::parse(f);
  ASSERT_GE(fixtures.size(), 12u);
  // SmolLM3 writes today's date into its header: the generator renders it as this day.
  ::setenv("KRAFLA_CHAT_DATE", "02 December 2026", 1);
  for (const auto& fx : fixtures) {
    std::vector<ChatMessage> msgs;
    for (const auto& m : fx["messages"]) msgs.push_back({m["role"], m["content"]});
    const auto& t = chat_template(fx["template"].get<std::string>());
    EXPECT_EQ(t.render(msgs, fx["add_generation_prompt"].get<bool>()), fx["text"].get<std::string>())
        << "template " << fx["template"] << ", " << msgs.size() << " messages";
  }
  ::unsetenv("KRAFLA_CHAT_DATE");
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
}

}  // namespace krafla
