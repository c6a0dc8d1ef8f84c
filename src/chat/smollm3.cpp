// SmolLM3's chat template, written from its official Jinja chat_template (verbatim in
// tests/unit/chat/gen_chat_fixtures.mjs), tools included.
#include <fmt/chrono.h>

#include <cstdlib>
#include <ctime>

#include "chat/chat_json.h"
#include "chat/chat_text.h"
#include "chat/templates.h"

namespace krafla {
namespace {

constexpr const char* kThinkInstructions =
    "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an "
    "assistant involves thoroughly exploring questions through a systematic thinking process "
    "before providing the final precise and accurate solutions. This requires engaging in a "
    "comprehensive cycle of analysis, summarizing, exploration, reassessment, reflection, "
    "backtracking, and iteration to develop well-considered thinking process. Please structure "
    "your response into two main sections: Thought and Solution using the specified format: "
    "<think> Thought section </think> Solution section. In the Thought section, detail your "
    "reasoning process in steps. Each step should include detailed considerations such as "
    "analysing questions, summarizing relevant findings, brainstorming new ideas, verifying the "
    "accuracy of the current steps, refining any errors, and revisiting previous steps. In the "
    "Solution section, based on various attempts, explorations, and reflections from the "
    "Thought section, systematically present the final solution that you deem correct. The "
    "Solution section should be logical, accurate, and concise and detail necessary steps "
    "needed to reach the conclusion.\n\n";

// Today's date as SmolLM3's template writes it (strftime_now("%d %B %Y"), e.g. "02 December
// 2026"), in UTC. The environment variable KRAFLA_CHAT_DATE, when set, replaces it (the tests
// pin the date with it).
std::string today_date() {
  if (const char* d = std::getenv("KRAFLA_CHAT_DATE"); d && *d) return d;
  // fmt::gmtime: gmtime_r is POSIX only, and gmtime's static buffer is shared by the server's
  // threads. %B is the English month name, as the C locale writes it.
  return fmt::format("{:%d %B %Y}", fmt::gmtime(std::time(nullptr)));
}

// The template's xml_tools (what transformers' tools are for SmolLM3): each tool printed with
// `| string`, Python's str() of the dict, not JSON.
std::string xml_tools(const std::vector<OrderedJson>& tools) {
  std::string out =
      "### Tools\n\nYou may call one or more functions to assist with the user query.\nYou are "
      "provided with function signatures within <tools></tools> XML tags:\n\n<tools>\n";
  for (const auto& t : tools) out += py_str(t) + "\n";
  return out +
         "</tools>\n\nFor each function call, return a json object with function name and "
         "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
         "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>\n\n<|im_end|>\n";
}

// SmolLM3: ChatML behind a system header of "## Metadata" (knowledge cutoff, today's date, the
// reasoning mode) and "## Custom Instructions" (the system message less its /think and
// /no_think flags, or the mode's default instructions). A flag in the system message overrides
// the mode (/no_think first); "/system_override" in it replaces the whole header with the
// instructions. The tools follow the instructions and close the header turn; without them the
// template never closes it (no <|im_end|>); later system messages are dropped. In /no_think
// mode every assistant turn and the generation prompt get an empty think block; assistant
// content loses its leading newlines. The template writes no tool calls (only an assistant
// turn's content) and a tool result as a plain user turn.
std::string smollm3_like(const ChatMessages& msgs, bool gen, bool think,
                         std::string_view tools_json, const char* tmpl) {
  const auto tools = parse_tools(tools_json, tmpl);
  const char* ws = " \t\n\r\f\v";
  std::string out = "<|im_start|>system\n", custom, system;
  if (!msgs.empty() && msgs[0].role == "system") {
    system = msgs[0].content;
    if (system.find("/no_think") != std::string::npos)
      think = false;
    else if (system.find("/think") != std::string::npos)
      think = true;
    custom = strip_chars(replace_all(replace_all(system, "/no_think", ""), "/think", ""), ws, false,
                         true);
  }
  if (system.find("/system_override") != std::string::npos) {
    out +=
        strip_chars(replace_all(custom, "/system_override", ""), ws, false, true) + "<|im_end|>\n";
  } else {
    out += "## Metadata\n\nKnowledge Cutoff Date: June 2025\nToday Date: " + today_date() +
           "\nReasoning Mode: " + (think ? "/think" : "/no_think") +
           "\n\n## Custom Instructions\n\n";
    if (!custom.empty())
      out += custom + "\n\n";
    else if (think)
      out += kThinkInstructions;
    else
      out += "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n";
    if (!tools.empty()) out += xml_tools(tools);
  }
  const char* empty_think = think ? "" : "<think>\n\n</think>\n";
  for (const auto& m : msgs) {
    check_role(m, tmpl, true);
    if (m.role == "user" || m.role == "tool")
      out += "<|im_start|>user\n" + m.content + "<|im_end|>\n";
    else if (m.role == "assistant")
      out += "<|im_start|>assistant\n" + std::string(empty_think) +
             strip_chars(m.content, "\n", true, false) + "<|im_end|>\n";
  }
  if (gen) out += "<|im_start|>assistant\n" + std::string(empty_think);
  return out;
}

}  // namespace

std::string render_smollm3(const ChatMessages& msgs, bool gen, std::string_view tools_json) {
  return smollm3_like(msgs, gen, true, tools_json, "smollm3");
}
std::string render_smollm3_nothink(const ChatMessages& msgs, bool gen,
                                   std::string_view tools_json) {
  return smollm3_like(msgs, gen, false, tools_json, "smollm3-nothink");
}

}  // namespace krafla
