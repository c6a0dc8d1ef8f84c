// JSON as the chat templates write it: transformers' tojson filter (Python's json.dumps, keys in
// the order given) and Python's str() of the values json.loads makes, which some templates
// print with `| string`.
#pragma once
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "krafla/chat.h"

namespace krafla {

using OrderedJson = nlohmann::ordered_json;

// json.dumps(v, ensure_ascii=False): ", " and ": " separators; with indent >= 0 one item a line
// ("," then a newline), empty containers as {} and [].
std::string py_dumps(const OrderedJson& v, int indent = -1);
// Python's repr() of json.loads' value: single quotes unless the text has one and no double
// quote, True/False/None. Python escapes every non-printable code point; this escapes the
// control, format, separator, surrogate and private-use ones but writes unassigned code
// points as they are.
std::string py_repr(const OrderedJson& v);
// Python's str(): a string as it is, anything else as repr().
std::string py_str(const OrderedJson& v);

// The text parsed with its key order kept; nullopt when it is not JSON.
std::optional<OrderedJson> parse_json(std::string_view text);
// OpenAI's tools array: blank text and [] give none. Throws krafla::Error naming the template
// when the text is not a JSON array.
std::vector<OrderedJson> parse_tools(std::string_view tools_json, std::string_view tmpl);
// A call's arguments as the templates that expect a mapping get them: the JSON text parsed
// (vLLM and llama.cpp also parse OpenAI's text before rendering); a text that is not JSON stays
// a string.
OrderedJson call_arguments(const ToolCall& c);

}  // namespace krafla
