// Chat templates against renderings made by the Jinja reference (chat/gen_chat_fixtures.mjs).
#include "krafla/chat.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "chat/chat_json.h"
#include "krafla/error.h"

namespace krafla {

namespace {

using OrderedJson = nlohmann::ordered_json;

// A fixture's message in OpenAI's form: tool_calls [{id, function: {name, arguments}}].
ChatMessage fixture_message(const OrderedJson& m) {
  ChatMessage msg{m["role"], m["content"]};
  for (const auto& c : m.value("tool_calls", OrderedJson::array()))
    msg.tool_calls.push_back({c["id"], c["function"]["name"], c["function"]["arguments"]});
  msg.tool_call_id = m.value("tool_call_id", "");
  msg.name = m.value("name", "");
  return msg;
}

}  // namespace

TEST(Chat, MatchesJinjaRenderings) {
  std::ifstream f(std::string(KRAFLA_SOURCE_DIR) + "/tests/unit/chat/chat_fixtures.json");
  ASSERT_TRUE(f) << "chat_fixtures.json missing";
  // Ordered: the templates write the tools' keys in the order the client gave them.
  const auto fixtures = OrderedJson::parse(f);
  ASSERT_GE(fixtures.size(), 12u);
  // SmolLM3 writes today's date into its header: the generator renders it as this day.
  ::setenv("KRAFLA_CHAT_DATE", "02 December 2026", 1);
  std::map<std::string, int> per_template, with_tools;
  for (const auto& fx : fixtures) {
    const std::string name = fx["template"];
    ++per_template[name];
    std::vector<ChatMessage> msgs;
    for (const auto& m : fx["messages"]) msgs.push_back(fixture_message(m));
    const std::string tools = fx.contains("tools") ? fx["tools"].dump() : "";
    const bool gen = fx["add_generation_prompt"];
    const auto& t = chat_template(name);
    const bool tool_case = !tools.empty() || std::any_of(msgs.begin(), msgs.end(), [](auto& m) {
      return m.role == "tool" || !m.tool_calls.empty();
    });
    with_tools[name] += tool_case;
    if (fx.contains("error")) {  // the Jinja template raises
      EXPECT_THROW(t.render(msgs, gen, tools), Error)
          << "template " << name << " renders what the Jinja refuses: " << fx["error"];
      continue;
    }
    EXPECT_EQ(t.render(msgs, gen, tools), fx["text"].get<std::string>())
        << "template " << name << ", " << msgs.size() << " messages"
        << (tools.empty() ? "" : ", tools");
  }
  ::unsetenv("KRAFLA_CHAT_DATE");
  // Every template name is checked on the whole set of conversations (gemma: those it takes),
  // and each one that takes tools on the conversations with tools.
  for (const auto& name : chat_template_names()) {
    EXPECT_GE(per_template[name], name == "gemma" ? 5 : 10) << name << " renderings";
    EXPECT_EQ(with_tools[name] > 0, chat_template(name).supports_tools()) << name;
    if (chat_template(name).supports_tools()) {
      EXPECT_GE(with_tools[name], 7) << name;
    }
  }
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

// The templates whose models know tools render them; the others refuse tools, tool results and
// tool calls by the template's name (the server answers 400), and take "[]" as no tools.
TEST(Chat, TemplatesWithoutToolsRefuseThem) {
  std::vector<std::string> with_tools;
  for (const auto& name : chat_template_names())
    if (chat_template(name).supports_tools()) with_tools.push_back(name);
  EXPECT_EQ(with_tools,
            (std::vector<std::string>{"llama3.1", "qwen", "qwen3", "qwen3-nothink", "qwen3.5",
                                      "qwen3.5-nothink", "smollm3", "smollm3-nothink"}));
  const std::string tools = R"([{"type": "function", "function": {"name": "f"}}])";
  const ChatMessage call{"assistant", "", {{"c1", "f", "{}"}}};
  const ChatMessage result{"tool", "42", {}, "c1"};
  for (const auto& name : chat_template_names()) {
    const auto& t = chat_template(name);
    if (t.supports_tools()) continue;
    for (const auto& msgs : std::vector<std::vector<ChatMessage>>{
             {{"user", "hi"}}, {{"user", "hi"}, call}, {{"user", "hi"}, result}}) {
      try {
        t.render(msgs, true, msgs.size() == 1 ? tools : "");
        ADD_FAILURE() << name << " rendered tools";
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("chat template " + name + " does not support tools"),
                  std::string::npos)
            << e.what();
      }
    }
    EXPECT_EQ(t.render({{"user", "hi"}}, true, " [] "), t.render({{"user", "hi"}}, true)) << name;
  }
}

TEST(Chat, ToolsMustBeAJsonArray) {
  const auto& t = chat_template("qwen3");
  EXPECT_THROW(t.render({{"user", "hi"}}, true, R"({"type": "function"})"), Error);
  EXPECT_THROW(t.render({{"user", "hi"}}, true, "[{"), Error);
  EXPECT_EQ(t.render({{"user", "hi"}}, true, "[]"), t.render({{"user", "hi"}}, true));
  // Llama 3.1 writes the tools into the first user message: without one its template raises.
  EXPECT_THROW(chat_template("llama3.1").render({{"system", "s"}}, true, R"([{"a": 1}])"), Error);
}

// transformers' tojson is Python's json.dumps(ensure_ascii=False); SmolLM3's `tool | string` is
// Python's str(dict). The expected texts are Python 3.11's output for the same values, for what
// the fixtures leave out: empty containers under indent (the Jinja reference writes them
// apart) and characters that repr() escapes.
TEST(ChatJson, WritesAsPython) {
  const auto tool = OrderedJson::parse(
      R"({"type": "function", "function": {"name": "noop", "parameters": {"type": "object",
         "properties": {}, "required": []}}})");
  EXPECT_EQ(py_dumps(tool, 4),
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": \"noop\",\n "
            "       \"parameters\": {\n            \"type\": \"object\",\n            "
            "\"properties\": {},\n            \"required\": []\n        }\n    }\n}");
  EXPECT_EQ(py_dumps(OrderedJson::parse(R"({"s": "\u001f\u007f/<>&\u00e9", "n": [1, 0.5, 1e-05,
            true, null], "e": {}})")),
            "{\"s\": \"\\u001f\x7f/<>&\u00e9\", \"n\": [1, 0.5, 1e-05, true, null], \"e\": {}}");
  const auto v = OrderedJson::parse(
      R"({"k": "a\u00a0b\u200bc\u0007d\ud83d\ude00e\u2028f\\g\u00e9\ufeff\udb40\udc01",
          "q": "it's", "both": "it's \"x\"", "n": [1, -2, 0.5, true, null]})");
  EXPECT_EQ(py_repr(v), R"({'k': 'a\xa0b\u200bc\x07d😀e\u2028f\\gé\ufeff\U000e0001', 'q': "it's", )"
                        R"('both': 'it\'s "x"', 'n': [1, -2, 0.5, True, None]})");
  EXPECT_EQ(py_str(OrderedJson("as is")), "as is");
  EXPECT_EQ(py_str(OrderedJson(true)), "True");
}

}  // namespace krafla
