#include "server/request_fields.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "server/api_error.h"

namespace krafla::server {

using nlohmann::json;

void wrong_type(const std::string& name, const char* expected, const json& v) {
  throw ApiError::invalid(
      fmt::format("Invalid type for '{}': expected {}, but got {}.", name, expected, v.type_name()),
      name, "invalid_type");
}

void bad_value(const std::string& name, const std::string& why) {
  throw ApiError::invalid(fmt::format("Invalid value for '{}': {}", name, why), name,
                          "invalid_value");
}

void unsupported(const std::string& name, const std::string& why) {
  throw ApiError::invalid(fmt::format("'{}' is not supported by this server: {}", name, why), name,
                          "unsupported_parameter");
}

namespace {

bool is_integer(const json& v) { return v.is_number_integer() || v.is_number_unsigned(); }

// Checks of the ignored metadata fields: the type only.
void a_string(const json& v, const std::string& n) {
  if (!v.is_string()) wrong_type(n, "a string", v);
}
void a_boolean(const json& v, const std::string& n) {
  if (!v.is_boolean()) wrong_type(n, "a boolean", v);
}
void an_object(const json& v, const std::string& n) {
  if (!v.is_object()) wrong_type(n, "an object", v);
}

// Checks of the unimplemented options: the type, then the one value that asks for nothing.
void only_one(const json& v, const std::string& n) {
  if (!is_integer(v)) wrong_type(n, "an integer", v);
  if (v != 1) unsupported(n, "only 1 is implemented.");
}
void only_zero_penalty(const json& v, const std::string& n) {
  if (!v.is_number()) wrong_type(n, "a number", v);
  const double x = v.get<double>();
  if (!std::isfinite(x) || x < -2 || x > 2) bad_value(n, fmt::format("{} is outside [-2, 2].", x));
  // OpenAI's penalties subtract from logits by count; the multiplicative repeat penalty cannot
  // express that, so a non-zero value is refused rather than silently approximated.
  if (x != 0) unsupported(n, "only 0 is accepted; use repeat_penalty (e.g. 1.1) instead.");
}
void only_empty_object(const json& v, const std::string& n) {
  if (!v.is_object()) wrong_type(n, "an object", v);
  if (!v.empty()) unsupported(n, "not implemented.");
}
void only_no_tools(const json& v, const std::string& n) {
  if (!v.is_array()) wrong_type(n, "an array", v);
  if (!v.empty()) unsupported(n, "tool calling is not implemented.");
}
// With no tools, "none" and "auto" both mean: no tool call.
void only_no_tool_choice(const json& v, const std::string& n) {
  if (!v.is_string() && !v.is_object()) wrong_type(n, "a string or an object", v);
  if (v != "none" && v != "auto") unsupported(n, "tool calling is not implemented.");
}
void only_text_modality(const json& v, const std::string& n) {
  if (!v.is_array()) wrong_type(n, "an array", v);
  for (const json& m : v)
    if (m != "text") unsupported(n, "only the \"text\" modality is implemented.");
}
void only_false(const json& v, const std::string& n) {
  if (!v.is_boolean()) wrong_type(n, "a boolean", v);
  if (v.get<bool>()) unsupported(n, "not implemented.");
}
void only_empty_suffix(const json& v, const std::string& n) {
  if (!v.is_string()) wrong_type(n, "a string", v);
  if (!v.get<std::string>().empty()) unsupported(n, "insertion is not implemented.");
}
void never(const json&, const std::string& n) { unsupported(n, "not implemented."); }

constexpr bool kChat = true, kText = true, kNo = false;
using enum FieldUse;

// Sorted by kind, then name; docs/server.md has the same table.
const FieldRule kRules[] = {
    {"model", kChat, kText, kImplemented, nullptr},
    {"messages", kChat, kNo, kImplemented, nullptr},
    {"prompt", kNo, kText, kImplemented, nullptr},
    {"max_tokens", kChat, kText, kImplemented, nullptr},
    {"max_completion_tokens", kChat, kText, kImplemented, nullptr},
    {"temperature", kChat, kText, kImplemented, nullptr},
    {"top_p", kChat, kText, kImplemented, nullptr},
    {"top_k", kChat, kText, kImplemented, nullptr},
    {"min_p", kChat, kText, kImplemented, nullptr},
    {"repeat_penalty", kChat, kText, kImplemented, nullptr},
    {"repeat_last_n", kChat, kText, kImplemented, nullptr},
    {"seed", kChat, kText, kImplemented, nullptr},
    {"stop", kChat, kText, kImplemented, nullptr},
    {"stream", kChat, kText, kImplemented, nullptr},
    {"stream_options", kChat, kText, kImplemented, nullptr},
    {"n", kChat, kText, kImplemented, nullptr},
    {"logprobs", kChat, kText, kImplemented, nullptr},
    {"top_logprobs", kChat, kNo, kImplemented, nullptr},
    {"response_format", kChat, kNo, kImplemented, nullptr},
    {"tools", kChat, kNo, kImplemented, nullptr},
    {"tool_choice", kChat, kNo, kImplemented, nullptr},

    {"metadata", kChat, kText, kIgnored, an_object},
    {"parallel_tool_calls", kChat, kNo, kIgnored, a_boolean},
    {"prediction", kChat, kNo, kIgnored, an_object},
    {"prompt_cache_key", kChat, kText, kIgnored, a_string},
    {"prompt_cache_retention", kChat, kText, kIgnored, a_string},
    {"safety_identifier", kChat, kText, kIgnored, a_string},
    {"service_tier", kChat, kText, kIgnored, a_string},
    {"store", kChat, kText, kIgnored, a_boolean},
    {"user", kChat, kText, kIgnored, a_string},

    {"audio", kChat, kNo, kNoOpOnly, never},
    {"best_of", kNo, kText, kNoOpOnly, only_one},
    {"echo", kNo, kText, kNoOpOnly, only_false},
    {"frequency_penalty", kChat, kText, kNoOpOnly, only_zero_penalty},
    {"function_call", kChat, kNo, kNoOpOnly, only_no_tool_choice},
    {"functions", kChat, kNo, kNoOpOnly, only_no_tools},
    {"logit_bias", kChat, kText, kNoOpOnly, only_empty_object},
    {"modalities", kChat, kNo, kNoOpOnly, only_text_modality},
    {"presence_penalty", kChat, kText, kNoOpOnly, only_zero_penalty},
    {"reasoning_effort", kChat, kNo, kNoOpOnly, never},
    {"suffix", kNo, kText, kNoOpOnly, only_empty_suffix},
    {"verbosity", kChat, kNo, kNoOpOnly, never},
    {"web_search_options", kChat, kNo, kNoOpOnly, never},
};

const FieldRule* find_rule(std::string_view name) {
  const auto it = std::find_if(std::begin(kRules), std::end(kRules),
                               [&](const FieldRule& r) { return r.name == name; });
  return it == std::end(kRules) ? nullptr : &*it;
}

[[noreturn]] void unknown(const std::string& name) {
  throw ApiError::invalid(
      fmt::format("Unrecognized request argument supplied: '{}'. This server does not implement "
                  "it (docs/server.md lists the fields it accepts).",
                  name),
      name, "unsupported_parameter");
}

}  // namespace

std::span<const FieldRule> field_rules() { return kRules; }

void check_fields(const json& body, Endpoint ep) {
  const bool chat = ep == Endpoint::kChat;
  for (const auto& [name, value] : body.items()) {
    if (value.is_null()) continue;
    const FieldRule* rule = find_rule(name);
    if (!rule) unknown(name);
    if (!(chat ? rule->chat : rule->completion))
      unsupported(name, fmt::format("it is a parameter of {}, not of {}.",
                                    chat ? "/v1/completions" : "/v1/chat/completions",
                                    chat ? "/v1/chat/completions" : "/v1/completions"));
    if (rule->check) rule->check(value, name);
  }
}

void check_message_fields(const json& m, const std::string& where) {
  for (const auto& [key, value] : m.items()) {
    const std::string name = where + "." + key;
    if (value.is_null() || key == "role" || key == "content") continue;
    if (key == "refusal") {
      a_string(value, name);
    } else if (key == "annotations") {
      if (!value.is_array()) wrong_type(name, "an array", value);
    } else if (key == "tool_calls" || key == "tool_call_id") {
      // parsed in request.cpp
    } else if (key == "name") {
      // OpenAI shows the name to the model; the chat templates have no place for it, so
      // dropping it would change the conversation without saying so.
      a_string(value, name);
      unsupported(name, "participant names are not implemented.");
    } else if (key == "audio" || key == "function_call") {
      unsupported(name, "not implemented.");
    } else {
      unknown(name);
    }
  }
}

}  // namespace krafla::server
