// Chat templates rendered by name, as the models' own Jinja chat_template renders them.
#pragma once
#include <string>
#include <string_view>
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

// Hides a reply's reasoning while it streams: drops everything from "<think>" through
// "</think>" and the newlines after it, whatever way the tags are cut across pushes.
// Construct it with in_think=true when the prompt already opened the block (Qwen3.5's
// generation prompt ends with "<think>\n"; see prompt_opens_think).
class ThinkFilter {
 public:
  explicit ThinkFilter(bool in_think = false) : in_think_(in_think) {}
  // The part of `text` (appended to what was held back) that can be shown now.
  std::string push(std::string_view text);
  // At the end of the reply: what was held back as a possible tag start, unless in a block.
  std::string flush();
  // Whether the reply so far ends inside a think block (it was cut before "</think>").
  bool in_think() const { return in_think_; }

  // Whether a rendered prompt ends inside an open think block, so that the reply starts with
  // reasoning.
  static bool prompt_opens_think(std::string_view prompt);

 private:
  std::string held_;  // a tail that may be the start of the next tag
  bool in_think_;
  bool after_close_ = false;  // dropping the newlines that follow "</think>"
};

}  // namespace krafla
