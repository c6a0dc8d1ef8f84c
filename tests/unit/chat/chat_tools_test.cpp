// Tool calls read back from replies (parse_tool_calls): replies made by rendering an assistant
// turn with the template itself (the markup its model is shown), and malformed markup, which
// must come back as text.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "krafla/chat.h"
#include "krafla/error.h"

namespace krafla {
namespace {

const char* kTools = R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}},
  {"type": "function", "function": {"name": "note", "parameters": {"type": "object",
    "properties": {"text": {"type": "string"}, "tags": {"type": "array"},
                   "urgent": {"type": "boolean"}, "extra": {"type": ["object", "null"]}}}}}])";

const ToolCall kWeather{"", "get_weather", R"({"city": "Paris", "days": 3})"};
const ToolCall kNote{"", "note",
                     R"({"text": "42\nsecond line", "tags": ["a", "b"], "urgent": true, )"
                     R"("extra": null})"};

// The templates whose renderings show the calls (SmolLM3's template writes none).
const std::vector<std::string> kRendering = {"qwen",    "qwen3",           "qwen3-nothink",
                                             "qwen3.5", "qwen3.5-nothink", "llama3.1"};

// The reply of an assistant turn as the template renders it: the conversation with the turn,
// less the prompt before it and the end of the turn.
std::string rendered_reply(const ChatTemplate& t, const ChatMessage& assistant) {
  const std::vector<ChatMessage> prompt = {{"user", "What now?"}};
  const std::string p = t.render(prompt, true, kTools);
  const std::string whole = t.render({prompt[0], assistant}, false, kTools);
  EXPECT_TRUE(whole.starts_with(p)) << t.name << ": the prompt is not a prefix";
  const size_t end = whole.rfind(t.stop_tokens[0]);
  EXPECT_NE(end, std::string::npos);
  return whole.substr(p.size(), end - p.size());
}

// The content less reasoning (the prompt may have opened it, so only the close is there).
std::string answer(const std::string& content) {
  const size_t close = content.rfind("</think>");
  std::string s = close == std::string::npos ? content : content.substr(close + 8);
  while (!s.empty() && (s.front() == '\n' || s.front() == ' ')) s.erase(0, 1);
  return s;
}

void expect_calls(const ToolCallReply& r, const std::vector<ToolCall>& want,
                  const std::string& where) {
  ASSERT_EQ(r.calls.size(), want.size()) << where << "\ncontent: " << r.content;
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(r.calls[i].id, "") << where;
    EXPECT_EQ(r.calls[i].name, want[i].name) << where;
    EXPECT_EQ(r.calls[i].arguments, want[i].arguments) << where;
  }
}

TEST(ChatTools, FormatsAndOpenings) {
  for (const auto& name : chat_template_names()) {
    const auto& t = chat_template(name);
    const std::string_view open = t.tool_call_open();
    switch (t.tool_format) {
      case ToolFormat::kNone:
        EXPECT_EQ(open, "") << name;
        break;
      case ToolFormat::kJsonReply:
        EXPECT_EQ(open, "{") << name;
        break;
      default:
        EXPECT_EQ(open, "<tool_call>") << name;
    }
  }
  EXPECT_EQ(chat_template("llama3.1").tool_format, ToolFormat::kJsonReply);
  EXPECT_EQ(chat_template("qwen3.5").tool_format, ToolFormat::kXmlInTags);
  EXPECT_EQ(chat_template("qwen3.5-nothink").tool_format, ToolFormat::kXmlInTags);
  for (const char* name : {"qwen", "qwen3", "qwen3-nothink", "smollm3", "smollm3-nothink"})
    EXPECT_EQ(chat_template(name).tool_format, ToolFormat::kJsonInTags) << name;
  EXPECT_EQ(chat_template("llama3.1").stop_tokens.back(), "<|eom_id|>");
}

// render → reply → parse gives the call back, byte for byte (arguments in json.dumps' form).
TEST(ChatTools, RoundTripOneCall) {
  for (const auto& name : kRendering) {
    const auto& t = chat_template(name);
    for (const ToolCall& call : {kWeather, kNote}) {
      const std::string reply = rendered_reply(t, {"assistant", "", {call}});
      const ToolCallReply r = parse_tool_calls(name, reply, kTools);
      expect_calls(r, {call}, name + ": " + reply);
      EXPECT_EQ(answer(r.content), "") << name;
    }
  }
}

TEST(ChatTools, RoundTripParallelCallsAfterText) {
  for (const auto& name : kRendering) {
    if (name == "llama3.1") continue;  // one call a turn
    const auto& t = chat_template(name);
    const std::string reply =
        rendered_reply(t, {"assistant", "Let me check both.", {kWeather, kNote}});
    const ToolCallReply r = parse_tool_calls(name, reply, kTools);
    expect_calls(r, {kWeather, kNote}, name + ": " + reply);
    EXPECT_EQ(answer(r.content), "Let me check both.") << name;
  }
}

// SmolLM3's template writes no calls: its replies follow the format its system turn shows.
TEST(ChatTools, SmolLM3Calls) {
  for (const char* name : {"smollm3", "smollm3-nothink"}) {
    const std::string prompt = chat_template(name).render({{"user", "hi"}}, true, kTools);
    EXPECT_NE(prompt.find("<tool_call>\n{\"name\": <function-name>, \"arguments\": "
                          "<args-json-object>}\n</tool_call>"),
              std::string::npos);
    const std::string reply =
        "<think>\nThe user wants weather.\n</think>\nOn it.\n<tool_call>\n{\"name\": "
        "\"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n</tool_call>\n";
    const ToolCallReply r = parse_tool_calls(name, reply, kTools);
    expect_calls(r, {kWeather}, name);
    EXPECT_EQ(r.content, "<think>\nThe user wants weather.\n</think>\nOn it.");
  }
}

TEST(ChatTools, ArgumentsAsTextOrMissing) {
  const auto r = parse_tool_calls(
      "qwen3", "<tool_call>\n{\"name\": \"f\", \"arguments\": \"{\\\"a\\\":1}\"}\n</tool_call>");
  expect_calls(r, {{"", "f", "{\"a\":1}"}}, "text arguments stay as they are");
  expect_calls(parse_tool_calls("qwen", "<tool_call>{\"name\": \"f\"}</tool_call>"),
               {{"", "f", "{}"}}, "no arguments");
  expect_calls(
      parse_tool_calls("qwen", "<tool_call>{\"name\": \"f\", \"arguments\": {\"b\":[1,2]}}"),
      {{"", "f", "{\"b\": [1, 2]}"}}, "unclosed last call, compact arguments");
}

// Whatever does not parse as a call is returned as text, the reply unchanged.
TEST(ChatTools, MalformedMarkupStaysContent) {
  for (const char* text : {
           "<tool_call>\nnot json\n</tool_call>",
           "<tool_call>\n{\"arguments\": {}}\n</tool_call>",                  // no name
           "<tool_call>\n{\"name\": \"\", \"arguments\": {}}\n</tool_call>",  // empty name
           "<tool_call>\n{\"name\": \"f\", \"arguments\": [1]}\n</tool_call>",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": \"nope\"}\n</tool_call>",
           "<tool_call>\n[{\"name\": \"f\"}]\n</tool_call>",
           "<tool_call>\n{\"name\": \"f\", \"arguments\": {",  // cut off
           "plain answer, {\"name\": \"f\"} in it",
       }) {
    for (const char* name : {"qwen", "qwen3", "smollm3"}) {
      const ToolCallReply r = parse_tool_calls(name, text);
      EXPECT_TRUE(r.calls.empty()) << name << ": " << text;
      EXPECT_EQ(r.content, text) << name;
    }
  }
  // A good call next to a bad one: the bad one stays in the content.
  const ToolCallReply r =
      parse_tool_calls("qwen3",
                       "A\n<tool_call>\nbad\n</tool_call>\n<tool_call>\n{\"name\": \"f\", "
                       "\"arguments\": {}}\n</tool_call>\n");
  expect_calls(r, {{"", "f", "{}"}}, "mixed");
  EXPECT_EQ(r.content, "A\n<tool_call>\nbad\n</tool_call>");
}

// A think block may talk about calls: only the markup after the reasoning counts.
TEST(ChatTools, CallsInsideReasoningAreText) {
  const std::string text =
      "<think>\nI could write <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>\n"
      "</think>\n\nNo call needed.";
  for (const char* name : {"qwen3", "smollm3"}) {
    const ToolCallReply r = parse_tool_calls(name, text);
    EXPECT_TRUE(r.calls.empty()) << name;
    EXPECT_EQ(r.content, text) << name;
  }
}

TEST(ChatTools, Llama31WholeReply) {
  const char* name = "llama3.1";
  const std::vector<ToolCall> want = {{"", "get_weather", R"({"city": "Paris"})"}};
  for (const char* text : {
           "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
           "  {\"name\": \"get_weather\", \"parameters\": {\"city\":\"Paris\"}}\n",
           "<|python_tag|>{\"type\": \"function\", \"name\": \"get_weather\", \"parameters\": "
           "{\"city\": \"Paris\"}}",
           "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}",
       }) {
    const ToolCallReply r = parse_tool_calls(name, text);
    expect_calls(r, want, text);
    EXPECT_EQ(r.content, "") << text;
  }
  for (const char* text : {
           "The weather is nice.",
           "Sure: {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}",
           "{\"parameters\": {\"city\": \"Paris\"}}",
           "{\"name\": \"get_weather\", \"parameters\": {\"city\": ",
           "{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"parameters\": {}}",
       }) {
    const ToolCallReply r = parse_tool_calls(name, text);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

// Qwen3.5 writes values as text: the tools' parameter types decide what a value was.
TEST(ChatTools, Qwen35ValuesAndMalformedXml) {
  const std::string call =
      "<tool_call>\n<function=note>\n<parameter=text>\n42\n</parameter>\n<parameter=urgent>\n"
      "False\n</parameter>\n<parameter=extra>\nNone\n</parameter>\n<parameter=n>\n2.5\n"
      "</parameter>\n<parameter=s>\nhello\n</parameter>\n</function>\n</tool_call>";
  expect_calls(
      parse_tool_calls("qwen3.5", call, kTools),
      {{"", "note", R"({"text": "42", "urgent": false, "extra": null, "n": 2.5, "s": "hello"})"}},
      "with the tools' types");
  expect_calls(
      parse_tool_calls("qwen3.5", call),
      {{"", "note", R"({"text": 42, "urgent": false, "extra": null, "n": 2.5, "s": "hello"})"}},
      "without them");
  for (const char* text : {
           "<tool_call>\n<function=note>\n<parameter=text>\nx\n</function>\n</tool_call>",
           "<tool_call>\n<parameter=text>\nx\n</parameter>\n</tool_call>",
           "<tool_call>\n<function=>\n</function>\n</tool_call>",
           "<tool_call>\n<function=note>\n</function>\ntrailing\n</tool_call>",
           "<tool_call>\n<function=note>\n<parameter=text>\nx\n</parameter>\n</tool_call>",
           "<tool_call>\n{\"name\": \"note\", \"arguments\": {}}\n</tool_call>",  // not XML
       }) {
    const ToolCallReply r = parse_tool_calls("qwen3.5", text, kTools);
    EXPECT_TRUE(r.calls.empty()) << text;
    EXPECT_EQ(r.content, text);
  }
}

TEST(ChatTools, TemplatesWithoutToolsReturnTheText) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  for (const char* name : {"llama3", "chatml", "gemma", "smollm"}) {
    const ToolCallReply r = parse_tool_calls(name, text);
    EXPECT_TRUE(r.calls.empty()) << name;
    EXPECT_EQ(r.content, text) << name;
  }
  EXPECT_THROW(parse_tool_calls("nonesuch", text), Error);
}

}  // namespace
}  // namespace krafla
