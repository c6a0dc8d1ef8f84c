// Fuzz target "chat": arbitrary messages through every chat template, and arbitrary replies
// through the tool-call parser and the think filter. Fields: template | flags | tools_json |
// reply | then per message: role | content | tool call name | tool call arguments. Rendering
// throws krafla::Error only for what a template refuses (a role, tools it has no format for);
// parse_tool_calls and ThinkFilter never throw.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "krafla/chat.h"
#include "krafla/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::vector<std::string> names = krafla::chat_template_names();
  krafla::fuzz::FuzzInput in(data, size);
  const auto& tmpl = krafla::chat_template(names[in.byte() % names.size()]);
  const uint8_t flags = in.byte();
  const std::string tools(in.field());
  const std::string_view reply = in.field();
  std::vector<krafla::ChatMessage> msgs;
  static const char* const kRoles[] = {"system", "user", "assistant", "tool"};
  while (!in.empty() && msgs.size() < 64) {
    const uint8_t r = in.byte();
    krafla::ChatMessage m;
    m.role = r < 250 ? kRoles[r % 4] : std::string(in.field());
    m.content = in.field();
    const std::string_view call = in.field();
    const std::string_view args = in.field();
    if (!call.empty() && m.role == "assistant")
      m.tool_calls.push_back({"call_1", std::string(call), std::string(args)});
    if (m.role == "tool") {
      m.tool_call_id = "call_1";
      m.name = call;
    }
    msgs.push_back(std::move(m));
  }
  try {
    const std::string prompt = tmpl.render(msgs, flags & 1, tools);
    (void)krafla::ThinkFilter::prompt_opens_think(prompt);
  } catch (const krafla::Error&) {
  }
  (void)krafla::parse_tool_calls(tmpl.name, reply, tools);
  krafla::ThinkFilter filter(flags & 2);
  // the reply in pieces of 1..8 bytes, as a stream of tokens arrives
  for (size_t i = 0, step = 1 + (flags >> 5); i < reply.size(); i += step)
    (void)filter.push(reply.substr(i, step));
  (void)filter.flush();
  return 0;
}
