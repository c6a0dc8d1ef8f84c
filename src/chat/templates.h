// The renderers of the tool-capable chat templates, each in the file of its family; chat.cpp
// names them in its table. tools_json as ChatTemplate::render takes it.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "krafla/chat.h"

namespace krafla {

using ChatMessages = std::vector<ChatMessage>;

// qwen.cpp
std::string render_qwen25(const ChatMessages& msgs, bool gen, std::string_view tools_json);
std::string render_qwen3(const ChatMessages& msgs, bool gen, std::string_view tools_json);
std::string render_qwen3_nothink(const ChatMessages& msgs, bool gen, std::string_view tools_json);
std::string render_qwen35(const ChatMessages& msgs, bool gen, std::string_view tools_json);
std::string render_qwen35_nothink(const ChatMessages& msgs, bool gen, std::string_view tools_json);
// smollm3.cpp
std::string render_smollm3(const ChatMessages& msgs, bool gen, std::string_view tools_json);
std::string render_smollm3_nothink(const ChatMessages& msgs, bool gen, std::string_view tools_json);
// llama31.cpp
std::string render_llama31(const ChatMessages& msgs, bool gen, std::string_view tools_json);

}  // namespace krafla
