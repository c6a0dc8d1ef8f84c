#include "chat/guess.h"

#include <initializer_list>

namespace krafla {
namespace {

bool has(std::string_view s, std::string_view part) { return s.find(part) != s.npos; }
bool any_of(std::string_view s, std::initializer_list<std::string_view> parts) {
  for (auto p : parts)
    if (has(s, p)) return true;
  return false;
}
bool all_of(std::string_view s, std::initializer_list<std::string_view> parts) {
  for (auto p : parts)
    if (!has(s, p)) return false;
  return true;
}

// A system turn written into the template itself (Qwen2's "You are a helpful assistant."):
// "<|im_start|>system" and a newline (real, or the two characters \n inside a Jinja string)
// followed by text rather than a quote or an expression.
bool has_builtin_system(std::string_view t) {
  constexpr std::string_view kOpen = "<|im_start|>system";
  for (size_t p = t.find(kOpen); p != t.npos; p = t.find(kOpen, p + 1)) {
    size_t q = p + kOpen.size();
    if (t.substr(q, 2) == "\\n") {
      q += 2;
    } else if (t.substr(q, 1) == "\n") {
      q += 1;
    } else {
      continue;
    }
    if (q < t.size() && t[q] != '\'' && t[q] != '"' && t[q] != '{') return true;
  }
  return false;
}

// ChatML-family templates differ in what they add around plain ChatML; each renderer matches
// one of them exactly.
std::string chatml_kind(std::string_view t) {
  if (any_of(t, {"Reasoning Mode", "Knowledge Cutoff Date", "/no_think"})) return "smollm3";
  if (has(t, "You are Qwen, created by Alibaba Cloud.")) return "qwen";
  if (has(t, "You are a helpful AI assistant named SmolLM")) return "smollm";
  // Qwen3.5: XML tool calls and a generation prompt that opens the think block
  if (all_of(t, {"<function=", "reasoning_content", "'<think>\\n'"})) return "qwen3.5";
  if (any_of(t, {"<think>", "enable_thinking", "reasoning_content"})) return "qwen3";
  if (has_builtin_system(t)) return "";
  return "chatml";
}

}  // namespace

std::string guess_chat_template(std::string_view tmpl,
                                const std::function<bool(std::string_view)>& has_token,
                                size_t n_tokens) {
  if (has(tmpl, "<|im_start|>")) return chatml_kind(tmpl);
  if (has(tmpl, "<|start_header_id|>") || (tmpl.empty() && has_token("<|start_header_id|>"))) {
    // Llama 3.1/3.3's own template (tools, a dated system turn); Llama 3.2's dates it today
    // (strftime_now), which llama3.1 does not, so it stays llama3.
    if (has(tmpl, "Environment: ipython") && !has(tmpl, "strftime_now")) return "llama3.1";
    return "llama3";
  }
  if (has(tmpl, "<|user|>")) return "zephyr";
  if (has(tmpl, "<start_of_turn>")) return "gemma";
  if (has(tmpl, "[INST]") ||
      (n_tokens == 32000 && has_token("<s>") && has_token("</s>") && has_token("\u2581")))
    return "llama2";
  return "";
}

}  // namespace krafla
