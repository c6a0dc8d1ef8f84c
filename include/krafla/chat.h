// Chat templates rendered by name, as the models' own Jinja chat_template renders them, and the
// tool calls of a reply read back from each template's markup (docs/server.md, "Tool calls").
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace krafla {

// A function call the assistant made, as OpenAI's chat API carries it.
struct ToolCall {
  std::string id;         // the call's id ("" when none was given)
  std::string name;       // the function called
  std::string arguments;  // its arguments as JSON text (OpenAI's function.arguments)
};

struct ChatMessage {
  std::string role;  // system, user, assistant, tool
  std::string content;
  std::vector<ToolCall> tool_calls = {};  // assistant: the calls it made
  std::string tool_call_id = {};          // tool: the call this message is the result of
  std::string name = {};                  // tool: the function's name, when the client gave it
};

// How a template's model writes a tool call in its reply.
enum class ToolFormat {
  kNone,        // the template renders no tools
  kJsonInTags,  // <tool_call>\n{"name": …, "arguments": {…}}\n</tool_call>, one or more
  kXmlInTags,   // <tool_call>\n<function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…
  kJsonReply,   // the whole reply is {"name": …, "parameters": {…}} (one call)
};

struct ChatTemplate {
  std::string name;
  // The renderer behind render(); tools_json as render() takes it.
  std::string (*render_fn)(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                           std::string_view tools_json);
  std::vector<std::string> stop_tokens;  // token strings that end an assistant turn
  ToolFormat tool_format = ToolFormat::kNone;

  // The whole conversation as text (special tokens written out), ending with the assistant
  // header when add_generation_prompt. tools_json is OpenAI's `tools` array as JSON text, its
  // keys in the client's order (the templates write them as given); "" or "[]": no tools.
  // Throws krafla::Error on a role the template can't take, and naming the template when it
  // does not support tools but is given some, a tool message or an assistant's tool calls.
  std::string render(const std::vector<ChatMessage>& msgs, bool add_generation_prompt,
                     std::string_view tools_json = {}) const;

  bool supports_tools() const { return tool_format != ToolFormat::kNone; }
  // The text that opens a tool call in a reply ("" without tools), so that a streaming server
  // can hold text back from where it appears. kJsonReply: "{", which opens a call only at the
  // start of the reply (after whitespace or <|python_tag|>).
  std::string_view tool_call_open() const;
};

// Throws krafla::Error listing the known names when `name` is unknown.
const ChatTemplate& chat_template(const std::string& name);
std::vector<std::string> chat_template_names();

// A reply split into its text and the tool calls written in the template's markup.
struct ToolCallReply {
  std::string content;          // the reply less its tool-call markup (trimmed when calls
                                // were found; the reply as it is otherwise)
  std::vector<ToolCall> calls;  // ids are "": the server names the calls
};

// Reads the tool calls of a generated reply (docs/server.md, "Tool calls" has the rules per
// format). Markup that does not parse stays in the content; a template without tools returns the
// reply as content. tools_json (as render() takes it) gives kXmlInTags the parameter types, so that
// a string parameter "42" stays a string. Throws krafla::Error only for an unknown template.
ToolCallReply parse_tool_calls(const std::string& template_name, std::string_view text,
                               std::string_view tools_json = {});

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
