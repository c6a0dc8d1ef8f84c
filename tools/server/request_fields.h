// The one rule for request fields (docs/server.md, "Request fields"): every top-level field a
// client may send is in one table, with what the server does with it. Implemented fields are
// parsed and validated by request.cpp; metadata that cannot change the reply is type-checked
// and ignored; an OpenAI option that is not implemented is accepted only at its no-op value
// (n = 1, logprobs = false, tools = [], …) and otherwise refused by name; a field the table does
// not know is refused by name too, so a client never believes an option took effect when it
// did not (mirostat, grammar, a typo such as "temprature").
#pragma once
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>

#include "server/request.h"

namespace krafla::server {

enum class FieldUse {
  kImplemented,  // parsed in request.cpp
  kIgnored,      // metadata: type-checked, then ignored
  kNoOpOnly,     // not implemented: only the value that asks for nothing is accepted
};

struct FieldRule {
  std::string_view name;
  bool chat, completion;  // the endpoints it belongs to
  FieldUse use;
  // For kIgnored and kNoOpOnly: throws ApiError for a value of the wrong type, or one that
  // asks for what is not implemented. Never called with null (null means "not set").
  void (*check)(const nlohmann::json& v, const std::string& name);
};

std::span<const FieldRule> field_rules();

// Throws ApiError (400, param = the field) for the first field of `body` that is unknown,
// belongs to the other endpoint, or fails its check. Fields set to null are skipped.
void check_fields(const nlohmann::json& body, Endpoint ep);

// The same rule for the keys of one chat message (`where` is "messages[i]"): role and content
// are implemented; the fields the API puts in its own reply messages (refusal, annotations)
// are ignored so that a reply can be appended to the conversation as it is.
void check_message_fields(const nlohmann::json& message, const std::string& where);

// The ApiErrors of request validation, shared with request.cpp.
[[noreturn]] void wrong_type(const std::string& name, const char* expected,
                             const nlohmann::json& v);
[[noreturn]] void bad_value(const std::string& name, const std::string& why);
[[noreturn]] void unsupported(const std::string& name, const std::string& why);

}  // namespace krafla::server
