// Llama 3.1's chat template, written from its official Jinja chat_template (the one of
// meta-llama/Llama-3.1-8B-Instruct, verbatim in tests/unit/chat/llama3_1.jinja), custom tools
// included (not its built-in tools: brave_search, wolfram_alpha, code_interpreter).
#include <fmt/format.h>

#include "chat/chat_json.h"
#include "chat/chat_text.h"
#include "chat/templates.h"
#include "krafla/error.h"

namespace krafla {

// Llama 3.1: a system turn that always carries the knowledge cutoff and the template's fixed
// date (and "Environment: ipython" with tools) before the trimmed system message. The tools
// go into the first message after it (tools_in_user_message, the template's default), each as
// tojson(indent=4). A call is the whole assistant turn, {"name": …, "parameters": {…}}, one
// per turn; a tool result is an ipython turn holding its text through tojson (a quoted string).
std::string render_llama31(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  const auto tools = parse_tools(tools_json, "llama3.1");
  size_t i = 0;
  std::string system;
  if (!msgs.empty() && msgs[0].role == "system") system = py_strip(msgs[i++].content);
  std::string out = "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n";
  if (!tools.empty()) out += "Environment: ipython\n";
  out +=
      "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n" + system + "<|eot_id|>";
  if (!tools.empty()) {
    if (i == msgs.size())
      throw Error(
          "chat template llama3.1: the tools go into the first user message; there is "
          "none");
    check_role(msgs[i], "llama3.1", true);
    out +=
        "<|start_header_id|>user<|end_header_id|>\n\nGiven the following functions, please "
        "respond with a JSON for a function call with its proper arguments that best answers "
        "the given prompt.\n\nRespond in the format {\"name\": function name, \"parameters\": "
        "dictionary of argument name and its value}.Do not use variables.\n\n";
    for (const auto& t : tools) out += py_dumps(t, 4) + "\n\n";
    out += py_strip(msgs[i++].content) + "<|eot_id|>";
  }
  for (; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, "llama3.1", true);
    if (!m.tool_calls.empty()) {
      if (m.tool_calls.size() != 1)
        throw Error(
            "chat template llama3.1: one tool call per assistant turn (the model makes "
            "no parallel calls)");
      const ToolCall& c = m.tool_calls[0];
      out += "<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"" + c.name +
             "\", \"parameters\": " + py_dumps(call_arguments(c)) + "}<|eot_id|>";
    } else if (m.role == "tool") {
      out += "<|start_header_id|>ipython<|end_header_id|>\n\n" + py_dumps(OrderedJson(m.content)) +
             "<|eot_id|>";
    } else {
      out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + py_strip(m.content) +
             "<|eot_id|>";
    }
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

}  // namespace krafla
