// The Qwen chat templates (2.5, 3, 3.5), each written from its official Jinja chat_template
// (tests/unit/chat/qwen2_5.jinja, the qwen3 tokenizer's, qwen3_5.jinja), tools included.
#include <fmt/format.h>

#include "chat/chat_json.h"
#include "chat/chat_text.h"
#include "chat/templates.h"
#include "krafla/error.h"

namespace krafla {
namespace {

constexpr const char* kQwenToolsHead =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are "
    "provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr const char* kQwenToolsTail =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call><|im_end|>\n";
constexpr const char* kQwen35ToolsRules =
    "\n\nIf you choose to call a function ONLY reply in the following format with NO "
    "suffix:\n\n<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>"
    "\nvalue_1\n</parameter>\n<parameter=example_parameter_2>\nThis is the value for the "
    "second parameter\nthat can span\nmultiple lines\n</parameter>\n</function>\n</tool_call>"
    "\n\n<IMPORTANT>\nReminder:\n- Function calls MUST follow the specified format: an inner "
    "<function=...></function> block must be nested within <tool_call></tool_call> XML tags\n- "
    "Required parameters MUST be specified\n- You may provide optional reasoning for your "
    "function call in natural language BEFORE the function call, but NOT after\n- If there is "
    "no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>";

// Qwen2.5 and Qwen3: the tool signatures, one tojson line each, inside the system turn.
std::string tools_block(const std::vector<OrderedJson>& tools) {
  std::string out = kQwenToolsHead;
  for (const auto& t : tools) out += '\n' + py_dumps(t);
  return out + kQwenToolsTail;
}

// A tool result: consecutive results share one user turn, each in <tool_response> tags.
// Qwen3.5's template opens no turn for a result that is the first message (open_at_first).
std::string tool_response(const ChatMessages& msgs, size_t i, const std::string& content,
                          bool open_at_first) {
  std::string out;
  if (i == 0 ? open_at_first : msgs[i - 1].role != "tool") out += "<|im_start|>user";
  out += "\n<tool_response>\n" + content + "\n</tool_response>";
  if (i + 1 == msgs.size() || msgs[i + 1].role != "tool") out += "<|im_end|>\n";
  return out;
}

std::string chatml_turn(const std::string& role, const std::string& content) {
  return "<|im_start|>" + role + "\n" + content + "<|im_end|>\n";
}

// Qwen2.5's calls: "\n<tool_call>\n{…}\n</tool_call>" each, the arguments through tojson.
std::string qwen25_calls(const ChatMessage& m) {
  std::string out;
  for (const auto& c : m.tool_calls)
    out += "\n<tool_call>\n{\"name\": \"" + c.name +
           "\", \"arguments\": " + py_dumps(call_arguments(c)) + "}\n</tool_call>";
  return out;
}

// Qwen3's calls: its template writes arguments given as a string as they are, so a call keeps
// the text the model generated.
std::string qwen3_calls(const ChatMessage& m, const std::string& content) {
  std::string out;
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    if (k > 0 || !content.empty()) out += "\n";
    out += "<tool_call>\n{\"name\": \"" + m.tool_calls[k].name +
           "\", \"arguments\": " + m.tool_calls[k].arguments + "}\n</tool_call>";
  }
  return out;
}

// Qwen3.5's XML calls: one <parameter=…> block per argument, mappings and lists through tojson,
// other values through Python's str() (True, None).
std::string qwen35_calls(const ChatMessage& m, const std::string& content, const char* tmpl) {
  std::string out;
  for (size_t k = 0; k < m.tool_calls.size(); ++k) {
    const ToolCall& c = m.tool_calls[k];
    out += k > 0                       ? "\n<tool_call>\n<function="
           : py_strip(content).empty() ? "<tool_call>\n<function="
                                       : "\n\n<tool_call>\n<function=";
    out += c.name + ">\n";
    const OrderedJson args = call_arguments(c);
    if (!args.is_object())
      throw Error(
          fmt::format("chat template {}: the arguments of tool call '{}' are not a JSON "
                      "object",
                      tmpl, c.name));
    for (auto it = args.begin(); it != args.end(); ++it)
      out += "<parameter=" + it.key() + ">\n" +
             (it->is_structured() ? py_dumps(*it) : py_str(*it)) + "\n</parameter>\n";
    out += "</function>\n</tool_call>";
  }
  return out;
}

// The last user message that is not a bare <tool_response>…</tool_response> (the Qwen3 and
// Qwen3.5 templates' last_query_index; Qwen3.5 strips the content first); npos when none.
size_t last_query(const ChatMessages& msgs, bool strip) {
  for (size_t i = msgs.size(); i-- > 0;) {
    const std::string c = strip ? py_strip(msgs[i].content) : msgs[i].content;
    if (msgs[i].role == "user" &&
        !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>")))
      return i;
  }
  return std::string::npos;
}

// Qwen3: ChatML; an assistant turn's <think>…</think> block is kept only after the last user
// query (earlier turns show only the answer); think=false appends an empty think block to
// the generation prompt (enable_thinking=false). Tools go into the system turn after the
// system message.
std::string qwen3_like(const ChatMessages& msgs, bool gen, bool think, std::string_view tools_json,
                       const char* tmpl) {
  const auto tools = parse_tools(tools_json, tmpl);
  const bool system = !msgs.empty() && msgs[0].role == "system";
  std::string out;
  if (!tools.empty())
    out += "<|im_start|>system\n" + (system ? msgs[0].content + "\n\n" : "") + tools_block(tools);
  // Without a query, the last message stands in for it.
  size_t query = last_query(msgs, false);
  if (query == std::string::npos) query = msgs.empty() ? 0 : msgs.size() - 1;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, tmpl, true);
    if (m.role == "tool") {
      out += tool_response(msgs, i, m.content, true);
      continue;
    }
    if (m.role != "assistant") {
      // With tools the first system message is already in the tools' system turn.
      if (!(i == 0 && m.role == "system" && !tools.empty())) out += chatml_turn(m.role, m.content);
      continue;
    }
    std::string content = m.content, reasoning;
    split_think(m.content, reasoning, content);
    if (i > query && (i + 1 == msgs.size() || !reasoning.empty()))
      out += "<|im_start|>assistant\n<think>\n" + strip_chars(reasoning, "\n", true, true) +
             "\n</think>\n\n" + strip_chars(content, "\n", true, false);
    else
      out += "<|im_start|>assistant\n" + content;
    out += qwen3_calls(m, content) + "<|im_end|>\n";
  }
  if (gen) {
    out += "<|im_start|>assistant\n";
    if (!think) out += "<think>\n\n</think>\n\n";
  }
  return out;
}

std::string qwen35_tools_block(const std::vector<OrderedJson>& tools, const ChatMessages& msgs) {
  std::string out =
      "<|im_start|>system\n# Tools\n\nYou have access to the following "
      "functions:\n\n<tools>";
  for (const auto& t : tools) out += '\n' + py_dumps(t);
  out += std::string("\n</tools>") + kQwen35ToolsRules;
  if (msgs[0].role == "system")
    if (const std::string c = py_strip(msgs[0].content); !c.empty()) out += "\n\n" + c;
  return out + "<|im_end|>\n";
}

// Qwen3.5: ChatML, every content stripped (|trim), no default system prompt; a system message
// may only come first. The last user query splits the conversation: each assistant turn after
// it carries a think block with its reasoning (empty when it has none), each one before it
// only the answer after its last </think>. The generation prompt opens a think block;
// think=false (enable_thinking=false) closes it empty at once. Tools go into the system turn
// before the system message; calls are written as XML.
std::string qwen35_like(const ChatMessages& msgs, bool gen, bool think, std::string_view tools_json,
                        const char* tmpl) {
  if (msgs.empty()) throw Error(fmt::format("chat template {}: no messages", tmpl));
  const auto tools = parse_tools(tools_json, tmpl);
  const size_t query = last_query(msgs, true);
  if (query == std::string::npos)
    throw Error(fmt::format("chat template {}: the conversation has no user message", tmpl));
  std::string out = tools.empty() ? "" : qwen35_tools_block(tools, msgs);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, tmpl, true);
    const std::string text = py_strip(m.content);
    if (m.role == "system" && i > 0)
      throw Error(fmt::format("chat template {}: a system message may only come first", tmpl));
    if (m.role == "tool") {
      out += tool_response(msgs, i, text, false);
    } else if (m.role != "assistant") {
      if (m.role == "user" || tools.empty()) out += chatml_turn(m.role, text);
    } else {
      std::string content = text, reasoning;
      split_think(text, reasoning, content);
      out += "<|im_start|>assistant\n";
      if (i > query) out += "<think>\n" + py_strip(reasoning) + "\n</think>\n\n";
      out += content + qwen35_calls(m, content, tmpl) + "<|im_end|>\n";
    }
  }
  if (gen)
    out += think ? "<|im_start|>assistant\n<think>\n"
                 : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  return out;
}

}  // namespace

// Qwen2.5: ChatML with a default system prompt when none is given; tools go into the system
// turn after it; an assistant turn with tool calls writes its content only when it has some.
std::string render_qwen25(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  const auto tools = parse_tools(tools_json, "qwen");
  const bool system = !msgs.empty() && msgs[0].role == "system";
  std::string out = "<|im_start|>system\n" +
                    (system ? msgs[0].content
                            : "You are Qwen, created by Alibaba Cloud. You are a helpful "
                              "assistant.");
  out += tools.empty() ? "<|im_end|>\n" : "\n\n" + tools_block(tools);
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, "qwen", true);
    if (m.role == "tool") {
      out += tool_response(msgs, i, m.content, true);
    } else if (m.role == "assistant" && !m.tool_calls.empty()) {
      out += "<|im_start|>assistant" + (m.content.empty() ? "" : "\n" + m.content) +
             qwen25_calls(m) + "<|im_end|>\n";
    } else if (i > 0 || m.role != "system") {
      out += chatml_turn(m.role, m.content);
    }
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_qwen3(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  return qwen3_like(msgs, gen, true, tools_json, "qwen3");
}
std::string render_qwen3_nothink(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  return qwen3_like(msgs, gen, false, tools_json, "qwen3-nothink");
}
std::string render_qwen35(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  return qwen35_like(msgs, gen, true, tools_json, "qwen3.5");
}
std::string render_qwen35_nothink(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  return qwen35_like(msgs, gen, false, tools_json, "qwen3.5-nothink");
}

}  // namespace krafla
