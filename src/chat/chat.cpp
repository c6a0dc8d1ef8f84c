// Chat templates, each written from the model family's official Jinja chat_template (see
// tests/unit/chat_test.cpp for renderings checked against the Jinja templates).
#include "krafla/chat.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdlib>
#include <cstring>
#include <ctime>

#include "krafla/error.h"

namespace krafla {
namespace {

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

void check_role(const ChatMessage& m, const char* tmpl) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant")
    throw Error(fmt::format("chat template {}: unknown role '{}'", tmpl, m.role));
}

// Llama 3 / 3.1 / 3.2 instruct (Llama 3's template: bos, headers, trimmed content, eot).
std::string render_llama3(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out = "<|begin_of_text|>";
  for (const auto& m : msgs) {
    check_role(m, "llama3");
    out +=
        "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
  }
  if (gen) out += "<|start_header_id|>assistant<|end_header_id|>\n\n";
  return out;
}

// Llama 2 chat / Mistral instruct: [INST] blocks; the system prompt goes inside the first
// user turn between <<SYS>> markers; each exchange is wrapped in <s> … </s>.
std::string render_llama2(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out, system;
  size_t i = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    system = "<<SYS>>\n" + msgs[0].content + "\n<</SYS>>\n\n";
    i = 1;
  }
  bool first_user = true;
  for (; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, "llama2");
    if (m.role == "user") {
      out += "<s>[INST] " + trim((first_user ? system : "") + m.content) + " [/INST]";
      first_user = false;
    } else if (m.role == "assistant") {
      out += " " + trim(m.content) + " </s>";
    } else {
      throw Error("chat template llama2: a system message may only come first");
    }
  }
  (void)gen;  // the template ends with [/INST]: the reply follows directly
  return out;
}

// Zephyr (TinyLlama-Chat): <|role|>\n content </s>\n, generation prompt <|assistant|>\n.
std::string render_zephyr(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out;
  for (const auto& m : msgs) {
    check_role(m, "zephyr");
    out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
  }
  if (gen) out += "<|assistant|>\n";
  return out;
}

// ChatML: <|im_start|>role\ncontent<|im_end|>\n, generation prompt <|im_start|>assistant\n.
// Qwen2/2.5 adds its default system prompt when none is given; SmolLM2 adds its own.
std::string chatml_with_default(const std::vector<ChatMessage>& msgs, bool gen,
                                const char* default_system, const char* tmpl) {
  std::string out;
  if (default_system && (msgs.empty() || msgs[0].role != "system"))
    out += std::string("<|im_start|>system\n") + default_system + "<|im_end|>\n";
  for (const auto& m : msgs) {
    check_role(m, tmpl);
    out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
  }
  if (gen) out += "<|im_start|>assistant\n";
  return out;
}

std::string render_chatml(const std::vector<ChatMessage>& msgs, bool gen) {
  return chatml_with_default(msgs, gen, nullptr, "chatml");
}
std::string render_qwen(const std::vector<ChatMessage>& msgs, bool gen) {
  return chatml_with_default(
      msgs, gen, "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "qwen");
}
std::string render_smollm(const std::vector<ChatMessage>& msgs, bool gen) {
  return chatml_with_default(
      msgs, gen, "You are a helpful AI assistant named SmolLM, trained by Hugging Face", "smollm");
}

std::string strip_chars(const std::string& s, const char* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) b = s.find_first_not_of(chars) == std::string::npos ? e : s.find_first_not_of(chars);
  if (right)
    while (e > b && std::strchr(chars, s[e - 1])) --e;
  return s.substr(b, e - b);
}

// The reasoning split of the Qwen3 and Qwen3.5 templates: reasoning is the text before the first
// </think> (after the last <think> there), content the text after the last </think>, both with
// the newlines at the seams stripped. False (and nothing set) without a </think>.
bool split_think(const std::string& text, std::string& reasoning, std::string& content) {
  const size_t close = text.rfind("</think>");
  if (close == std::string::npos) return false;
  std::string before = strip_chars(text.substr(0, text.find("</think>")), "\n", false, true);
  if (const size_t open = before.rfind("<think>"); open != std::string::npos)
    before = before.substr(open + 7);
  reasoning = strip_chars(before, "\n", true, false);
  content = strip_chars(text.substr(close + 8), "\n", true, false);
  return true;
}

// Qwen3: ChatML; an assistant turn's <think>…</think> block is kept only after the last user
// message (earlier turns show only the answer); think=false appends an empty think block to
// the generation prompt (enable_thinking=false).
std::string qwen3_like(const std::vector<ChatMessage>& msgs, bool gen, bool think,
                       const char* tmpl) {
  std::string out;
  // The template's last_query_index: the last user message, else the last message.
  size_t last_user = msgs.empty() ? 0 : msgs.size() - 1;
  for (size_t i = msgs.size(); i-- > 0;)
    if (msgs[i].role == "user") {
      last_user = i;
      break;
    }
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, tmpl);
    if (m.role == "user" || m.role == "system") {
      out += "<|im_start|>" + m.role + "\n" + m.content + "<|im_end|>\n";
      continue;
    }
    std::string content = m.content, reasoning;
    split_think(m.content, reasoning, content);
    const bool after_query = i > last_user;
    if (after_query && (i + 1 == msgs.size() || !reasoning.empty()))
      out += "<|im_start|>assistant\n<think>\n" + strip_chars(reasoning, "\n", true, true) +
             "\n</think>\n\n" + strip_chars(content, "\n", true, false);
    else
      out += "<|im_start|>assistant\n" + content;
    out += "<|im_end|>\n";
  }
  if (gen) {
    out += "<|im_start|>assistant\n";
    if (!think) out += "<think>\n\n</think>\n\n";
  }
  return out;
}
std::string render_qwen3(const std::vector<ChatMessage>& msgs, bool gen) {
  return qwen3_like(msgs, gen, true, "qwen3");
}
std::string render_qwen3_nothink(const std::vector<ChatMessage>& msgs, bool gen) {
  return qwen3_like(msgs, gen, false, "qwen3-nothink");
}

// The UTF-8 code point at s[p] (its length in n); a stray byte reads as U+FFFD, length 1.
char32_t utf8_at(const std::string& s, size_t p, size_t& n) {
  const auto b = static_cast<unsigned char>(s[p]);
  n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || p + n > s.size()) return n = 1, 0xFFFD;
  char32_t c = n == 1 ? b : b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto x = static_cast<unsigned char>(s[p + k]);
    if ((x & 0xC0) != 0x80) return n = 1, 0xFFFD;
    c = (c << 6) | (x & 0x3F);
  }
  return c;
}

// Python's str.isspace(): what Jinja's |trim strips in transformers (Python's jinja2), which
// differs from JavaScript's trim() at U+001C–U+001F, U+0085 (Python) and U+FEFF (JavaScript).
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string py_strip(const std::string& s) {
  size_t b = 0, e = s.size(), n = 0;
  while (b < e && py_space(utf8_at(s, b, n))) b += n;
  while (e > b) {
    size_t k = e - 1;
    while (k > b && e - k < 4 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!py_space(utf8_at(s, k, n)) || k + n != e) break;
    e = k;
  }
  return s.substr(b, e - b);
}

// Qwen3.5: ChatML, every content stripped (|trim), no default system prompt; a system message
// may only come first. The last user query (the last user message that is not a bare
// <tool_response>…</tool_response>) splits the conversation: each assistant turn after it
// carries a think block with its reasoning (empty when it has none), each one before it only
// the answer after its last </think>. The generation prompt opens a think block; think=false
// (enable_thinking=false) closes it empty at once.
std::string qwen35_like(const std::vector<ChatMessage>& msgs, bool gen, bool think,
                        const char* tmpl) {
  if (msgs.empty()) throw Error(fmt::format("chat template {}: no messages", tmpl));
  size_t last_query = std::string::npos;
  for (size_t i = msgs.size(); i-- > 0 && last_query == std::string::npos;) {
    const std::string c = py_strip(msgs[i].content);
    if (msgs[i].role == "user" &&
        !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>")))
      last_query = i;
  }
  if (last_query == std::string::npos)
    throw Error(fmt::format("chat template {}: the conversation has no user message", tmpl));
  std::string out;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const auto& m = msgs[i];
    check_role(m, tmpl);
    const std::string text = py_strip(m.content);
    if (m.role == "system" && i > 0)
      throw Error(fmt::format("chat template {}: a system message may only come first", tmpl));
    if (m.role != "assistant") {
      out += "<|im_start|>" + m.role + "\n" + text + "<|im_end|>\n";
      continue;
    }
    std::string content = text, reasoning;
    split_think(text, reasoning, content);
    out += "<|im_start|>assistant\n";
    if (i > last_query) out += "<think>\n" + py_strip(reasoning) + "\n</think>\n\n";
    out += content + "<|im_end|>\n";
  }
  if (gen)
    out += think ? "<|im_start|>assistant\n<think>\n"
                 : "<|im_start|>assistant\n<think>\n\n</think>\n\n";
  return out;
}
std::string render_qwen35(const std::vector<ChatMessage>& msgs, bool gen) {
  return qwen35_like(msgs, gen, true, "qwen3.5");
}
std::string render_qwen35_nothink(const std::vector<ChatMessage>& msgs, bool gen) {
  return qwen35_like(msgs, gen, false, "qwen3.5-nothink");
}

// Today's date as SmolLM3's template writes it (strftime_now("%d %B %Y"), e.g. "02 December
// 2026"), in UTC. The environment variable KRAFLA_CHAT_DATE, when set, replaces it (the tests
// pin the date with it).
std::string today_date() {
  if (const char* d = std::getenv("KRAFLA_CHAT_DATE"); d && *d) return d;
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char buf[64];
  return std::string(buf, std::strftime(buf, sizeof buf, "%d %B %Y", &tm));
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

// SmolLM3: ChatML behind a system header of "## Metadata" (knowledge cutoff, today's date, the
// reasoning mode) and "## Custom Instructions" (the system message less its /think and
// /no_think flags, or the mode's default instructions). A flag in the system message overrides
// the mode (/no_think first); "/system_override" in it replaces the whole header with the
// instructions. Without tools the template never closes the header turn (no <|im_end|>); later
// system messages are dropped. In /no_think mode every assistant turn and the generation prompt
// get an empty think block; assistant content loses its leading newlines.
std::string smollm3_like(const std::vector<ChatMessage>& msgs, bool gen, bool think,
                         const char* tmpl) {
  const char* ws = " \t\n\r\f\v";
  std::string out = "<|im_start|>system\n", custom, system;
  const bool has_system = !msgs.empty() && msgs[0].role == "system";
  if (has_system) {
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
      out +=
          "You are a helpful AI assistant named SmolLM, trained by Hugging Face. Your role as an "
          "assistant involves thoroughly exploring questions through a systematic thinking "
          "process before providing the final precise and accurate solutions. This requires "
          "engaging in a comprehensive cycle of analysis, summarizing, exploration, "
          "reassessment, reflection, backtracking, and iteration to develop well-considered "
          "thinking process. Please structure your response into two main sections: Thought and "
          "Solution using the specified format: <think> Thought section </think> Solution "
          "section. In the Thought section, detail your reasoning process in steps. Each step "
          "should include detailed considerations such as analysing questions, summarizing "
          "relevant findings, brainstorming new ideas, verifying the accuracy of the current "
          "steps, refining any errors, and revisiting previous steps. In the Solution section, "
          "based on various attempts, explorations, and reflections from the Thought section, "
          "systematically present the final solution that you deem correct. The Solution section "
          "should be logical, accurate, and concise and detail necessary steps needed to reach "
          "the conclusion.\n\n";
    else
      out += "You are a helpful AI assistant named SmolLM, trained by Hugging Face.\n\n";
  }
  const char* empty_think = think ? "" : "<think>\n\n</think>\n";
  for (const auto& m : msgs) {
    check_role(m, tmpl);
    if (m.role == "user")
      out += "<|im_start|>user\n" + m.content + "<|im_end|>\n";
    else if (m.role == "assistant")
      out += "<|im_start|>assistant\n" + std::string(empty_think) +
             strip_chars(m.content, "\n", true, false) + "<|im_end|>\n";
  }
  if (gen) out += "<|im_start|>assistant\n" + std::string(empty_think);
  return out;
}
std::string render_smollm3(const std::vector<ChatMessage>& msgs, bool gen) {
  return smollm3_like(msgs, gen, true, "smollm3");
}
std::string render_smollm3_nothink(const std::vector<ChatMessage>& msgs, bool gen) {
  return smollm3_like(msgs, gen, false, "smollm3-nothink");
}

// Gemma 2/3: <start_of_turn>user|model, content trimmed; a system prompt has no turn of its
// own: it is prefixed (with a blank line) to the first user turn; roles must alternate.
std::string render_gemma(const std::vector<ChatMessage>& msgs, bool gen) {
  std::string out = "<bos>", prefix;
  size_t i = 0;
  if (!msgs.empty() && msgs[0].role == "system") {
    prefix = msgs[0].content + "\n\n";
    i = 1;
  }
  for (size_t k = 0; i < msgs.size(); ++i, ++k) {
    const auto& m = msgs[i];
    check_role(m, "gemma");
    if ((m.role == "user") != (k % 2 == 0))
      throw Error(
          "chat template gemma: roles must alternate user/assistant after the system prompt");
    out += "<start_of_turn>" + std::string(m.role == "assistant" ? "model" : m.role) + "\n" +
           (k == 0 ? prefix : "") + trim(m.content) + "<end_of_turn>\n";
  }
  if (gen) out += "<start_of_turn>model\n";
  return out;
}

const std::vector<ChatTemplate>& all() {
  static const std::vector<ChatTemplate> t = {
      {"llama3", render_llama3, {"<|eot_id|>", "<|end_of_text|>"}},
      {"llama2", render_llama2, {"</s>"}},
      {"zephyr", render_zephyr, {"</s>"}},
      {"chatml", render_chatml, {"<|im_end|>", "<|endoftext|>"}},
      {"qwen", render_qwen, {"<|im_end|>", "<|endoftext|>"}},
      {"qwen3", render_qwen3, {"<|im_end|>", "<|endoftext|>"}},
      {"qwen3-nothink", render_qwen3_nothink, {"<|im_end|>", "<|endoftext|>"}},
      {"qwen3.5", render_qwen35, {"<|im_end|>", "<|endoftext|>"}},
      {"qwen3.5-nothink", render_qwen35_nothink, {"<|im_end|>", "<|endoftext|>"}},
      {"gemma", render_gemma, {"<end_of_turn>", "<eos>"}},
      {"smollm", render_smollm, {"<|im_end|>", "<|endoftext|>"}},
      {"smollm3", render_smollm3, {"<|im_end|>", "<|end_of_text|>"}},
      {"smollm3-nothink", render_smollm3_nothink, {"<|im_end|>", "<|end_of_text|>"}},
  };
  return t;
}

}  // namespace

const ChatTemplate& chat_template(const std::string& name) {
  for (const auto& t : all())
    if (t.name == name) return t;
  throw Error(fmt::format("unknown chat template '{}' (known: {})", name,
                          fmt::join(chat_template_names(), ", ")));
}

std::vector<std::string> chat_template_names() {
  std::vector<std::string> v;
  for (const auto& t : all()) v.push_back(t.name);
  return v;
}

}  // namespace krafla
