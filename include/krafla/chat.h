// Chat templates rendered by name, as the models' own Jinja chat_template renders them.
#pragma once
#include <string>
#include <vector>

namespace krafla {

struct ChatMessage {
  std::string role;  // system, user, assistant
  std::string content;
};

struct ChatTemplate {
  std::string name;
  // The whole conversation as text (special tokens written out), ending with the assistant
  // header when add_generation_prompt. Throws krafla::Error on a role the template can't take.
  std::string (*render)(const std::vector<ChatMessage>& msgs, bool add_generation_prompt);
  std::vector<std::string> stop_tokens;  // token strings that end an assistant turn
};

// Throws krafla::Error listing the known names when `name` is unknown.
const ChatTemplate& chat_template(const std::string& name);
std::vector<std::string> chat_template_names();

}  // namespace krafla
