// Chat templates, each written from the model family's official Jinja chat_template (see
// tests/unit/chat_test.cpp for renderings checked against the Jinja templates): the table of
// names, and the templates without tools (those with tools live in their family's file).
#include "krafla/chat.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "chat/chat_json.h"
#include "chat/chat_text.h"
#include "chat/templates.h"
#include "krafla/error.h"

namespace krafla {
namespace {

// Llama 3 instruct (Llama 3's template: bos, headers, trimmed content, eot); Llama 3.1's own
// template is llama3.1's.
std::string render_llama3(const ChatMessages& msgs, bool gen, std::string_view) {
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
std::string render_llama2(const ChatMessages& msgs, bool gen, std::string_view) {
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
std::string render_zephyr(const ChatMessages& msgs, bool gen, std::string_view) {
  std::string out;
  for (const auto& m : msgs) {
    check_role(m, "zephyr");
    out += "<|" + m.role + "|>\n" + m.content + "</s>\n";
  }
  if (gen) out += "<|assistant|>\n";
  return out;
}

// ChatML: <|im_start|>role\ncontent<|im_end|>\n, generation prompt <|im_start|>assistant\n.
// SmolLM2 adds its default system prompt when none is given.
std::string chatml_with_default(const ChatMessages& msgs, bool gen, const char* default_system,
                                const char* tmpl) {
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

std::string render_chatml(const ChatMessages& msgs, bool gen, std::string_view) {
  return chatml_with_default(msgs, gen, nullptr, "chatml");
}
std::string render_smollm(const ChatMessages& msgs, bool gen, std::string_view) {
  return chatml_with_default(
      msgs, gen, "You are a helpful AI assistant named SmolLM, trained by Hugging Face", "smollm");
}

// Gemma 2/3: <start_of_turn>user|model, content trimmed; a system prompt has no turn of its
// own: it is prefixed (with a blank line) to the first user turn; roles must alternate.
std::string render_gemma(const ChatMessages& msgs, bool gen, std::string_view) {
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
  using enum ToolFormat;
  static const std::vector<ChatTemplate> t = {
      {"llama3", render_llama3, {"<|eot_id|>", "<|end_of_text|>"}},
      // <|eom_id|> ends a turn that waits for a tool result (Llama 3.1's generation_config)
      {"llama3.1", render_llama31, {"<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"}, kJsonReply},
      {"llama2", render_llama2, {"</s>"}},
      {"zephyr", render_zephyr, {"</s>"}},
      {"chatml", render_chatml, {"<|im_end|>", "<|endoftext|>"}},
      {"qwen", render_qwen25, {"<|im_end|>", "<|endoftext|>"}, kJsonInTags},
      {"qwen3", render_qwen3, {"<|im_end|>", "<|endoftext|>"}, kJsonInTags},
      {"qwen3-nothink", render_qwen3_nothink, {"<|im_end|>", "<|endoftext|>"}, kJsonInTags},
      {"qwen3.5", render_qwen35, {"<|im_end|>", "<|endoftext|>"}, kXmlInTags},
      {"qwen3.5-nothink", render_qwen35_nothink, {"<|im_end|>", "<|endoftext|>"}, kXmlInTags},
      {"gemma", render_gemma, {"<end_of_turn>", "<eos>"}},
      {"smollm", render_smollm, {"<|im_end|>", "<|endoftext|>"}},
      {"smollm3", render_smollm3, {"<|im_end|>", "<|end_of_text|>"}, kJsonInTags},
      {"smollm3-nothink", render_smollm3_nothink, {"<|im_end|>", "<|end_of_text|>"}, kJsonInTags},
  };
  return t;
}

}  // namespace

std::string ChatTemplate::render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                                 std::string_view tools_json) const {
  // A template without tools would drop them silently, or the model would meet markup it was
  // never trained on: refuse, so that the server can answer 400.
  if (!supports_tools() && (!parse_tools(tools_json, name).empty() ||
                            std::any_of(msgs.begin(), msgs.end(), [](const ChatMessage& m) {
                              return m.role == "tool" || !m.tool_calls.empty();
                            })))
    throw Error(
        fmt::format("chat template {} does not support tools (given tools, tool calls or "
                    "tool results)",
                    name));
  return render_fn(msgs, add_generation_prompt, tools_json);
}

std::string_view ChatTemplate::tool_call_open() const {
  switch (tool_format) {
    case ToolFormat::kJsonInTags:
    case ToolFormat::kXmlInTags:
      return "<tool_call>";
    case ToolFormat::kJsonReply:
      return "{";
    case ToolFormat::kNone:
      break;
  }
  return "";
}

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
