// Chat templates, each written from the model family's official Jinja chat_template (see
// tests/unit/chat_test.cpp for renderings checked against the Jinja templates).
#include "krafla/chat.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

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
    out += "<|start_header_id|>" + m.role + "<|end_header_id|>\n\n" + trim(m.content) + "<|eot_id|>";
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

const std::vector<ChatTemplate>& all() {
  static const std::vector<ChatTemplate> t = {
      {"llama3", render_llama3, {"<|eot_id|>", "<|end_of_text|>"}},
      {"llama2", render_llama2, {"</s>"}},
      {"zephyr", render_zephyr, {"</s>"}},
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
