#include "server/request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>

#include "krafla/error.h"
#include "krafla/json_depth.h"
#include "server/api_error.h"
#include "server/request_fields.h"

namespace krafla::server {
namespace {

using nlohmann::json;

// OpenAI's own limit on stop sequences is 4; a few more cost nothing here.
constexpr size_t kMaxStops = 16;

// The field's value, or nullptr when absent or null: the SDKs send null for "not set".
const json* field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

double number(const json& body, const char* name, double def, double lo, double hi) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number()) wrong_type(name, "a number", *v);
  const double x = v->get<double>();
  if (!std::isfinite(x) || x < lo || x > hi)
    bad_value(name, fmt::format("{} is outside [{}, {}].", x, lo, hi));
  return x;
}

int64_t integer(const json& body, const char* name, int64_t def, int64_t lo, int64_t hi) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_number_integer() && !v->is_number_unsigned()) wrong_type(name, "an integer", *v);
  if (v->is_number_unsigned() && v->get<uint64_t>() > uint64_t(hi))
    bad_value(name, fmt::format("{} is above the maximum {}.", v->get<uint64_t>(), hi));
  const int64_t x = v->get<int64_t>();
  if (x < lo || x > hi) bad_value(name, fmt::format("{} is outside [{}, {}].", x, lo, hi));
  return x;
}

bool boolean(const json& body, const char* name, bool def) {
  const json* v = field(body, name);
  if (!v) return def;
  if (!v->is_boolean()) wrong_type(name, "a boolean", *v);
  return v->get<bool>();
}

std::vector<std::string> stop_strings(const json& body) {
  const json* v = field(body, "stop");
  std::vector<std::string> out;
  if (!v) return out;
  if (v->is_string()) {
    out.push_back(v->get<std::string>());
  } else if (v->is_array()) {
    if (v->size() > kMaxStops)
      bad_value("stop", fmt::format("at most {} stop sequences are allowed.", kMaxStops));
    for (const json& s : *v) {
      if (!s.is_string()) wrong_type("stop", "a string or an array of strings", *v);
      out.push_back(s.get<std::string>());
    }
  } else {
    wrong_type("stop", "a string or an array of strings", *v);
  }
  std::erase_if(out, [](const std::string& s) { return s.empty(); });
  return out;
}

// Sampling: OpenAI's fields plus llama.cpp's top_k / min_p / repeat_penalty extensions; what the
// request leaves out comes from the server's defaults (--temp, --top-k, … or OpenAI's).
SamplerParams sampler_params(const json& body, const RequestDefaults& d) {
  SamplerParams p = d.sampler;
  p.temperature = float(number(body, "temperature", p.temperature, 0.0, 2.0));
  p.top_p = float(number(body, "top_p", p.top_p, 0.0, 1.0));
  if (p.top_p <= 0.0f) p.temperature = 0.0f;  // an empty nucleus keeps only the best token
  p.top_k = int(integer(body, "top_k", p.top_k, 0, std::numeric_limits<int>::max()));
  p.min_p = float(number(body, "min_p", p.min_p, 0.0, 1.0));
  p.repeat_penalty = float(number(body, "repeat_penalty", p.repeat_penalty, 0.01, 10.0));
  p.repeat_last_n = int(integer(body, "repeat_last_n", p.repeat_last_n, -1, 1 << 20));
  if (const json* s = field(body, "seed")) {
    if (!s->is_number_integer() && !s->is_number_unsigned()) wrong_type("seed", "an integer", *s);
    p.seed = s->is_number_unsigned() ? s->get<uint64_t>() : uint64_t(s->get<int64_t>());
  } else if (d.seed) {
    p.seed = *d.seed;
  } else {
    p.seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  }
  return p;
}

// stream_options.include_usage; include_obfuscation pads chunks against length side channels
// on OpenAI's network, cannot change the reply, and is only type-checked.
bool stream_options(const json& body) {
  const json* so = field(body, "stream_options");
  if (!so) return false;
  if (!so->is_object()) wrong_type("stream_options", "an object", *so);
  bool include_usage = false;
  for (const auto& [key, value] : so->items()) {
    const std::string name = "stream_options." + key;
    if (value.is_null()) continue;
    if (key != "include_usage" && key != "include_obfuscation")
      unsupported(name, "unknown stream option.");
    if (!value.is_boolean()) wrong_type(name, "a boolean", value);
    if (key == "include_usage") include_usage = value.get<bool>();
  }
  return include_usage;
}

// Text of a message's content: a string, or an array of {"type": "text", "text": …} parts.
std::string content_text(const json& content, size_t i) {
  const std::string name = fmt::format("messages[{}].content", i);
  if (content.is_null()) return "";
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) wrong_type(name, "a string or an array of content parts", content);
  std::string out;
  for (const json& part : content) {
    if (!part.is_object()) wrong_type(name, "an array of content parts", content);
    const json* type = field(part, "type");
    if (!type || !type->is_string() || *type != "text")
      unsupported(name, "only content parts of type 'text' are accepted.");
    const json* text = field(part, "text");
    if (!text || !text->is_string()) wrong_type(name + ".text", "a string", text ? *text : json());
    out += text->get<std::string>();
  }
  return out;
}

// An assistant message's tool_calls: [{"id", "type": "function", "function": {"name",
// "arguments": JSON text}}].
std::vector<ToolCall> tool_calls(const json& v, const std::string& where) {
  if (!v.is_array()) wrong_type(where, "an array", v);
  std::vector<ToolCall> out;
  for (size_t i = 0; i < v.size(); ++i) {
    const json& c = v[i];
    const std::string at = fmt::format("{}[{}]", where, i);
    if (!c.is_object()) wrong_type(at, "an object", c);
    const json* f = field(c, "function");
    if (!f || !f->is_object()) wrong_type(at + ".function", "an object", f ? *f : json());
    const json* name = field(*f, "name");
    if (!name || !name->is_string())
      wrong_type(at + ".function.name", "a string", name ? *name : json());
    const json* args = field(*f, "arguments");
    if (args && !args->is_string()) wrong_type(at + ".function.arguments", "a string", *args);
    const json* id = field(c, "id");
    if (id && !id->is_string()) wrong_type(at + ".id", "a string", *id);
    out.push_back({id ? id->get<std::string>() : "", name->get<std::string>(),
                   args ? args->get<std::string>() : "{}"});
  }
  return out;
}

std::vector<ChatMessage> chat_messages(const json& body) {
  const json* v = field(body, "messages");
  if (!v)
    throw ApiError::invalid("Missing required parameter: 'messages'.", "messages",
                            "missing_required_parameter");
  if (!v->is_array()) wrong_type("messages", "an array", *v);
  if (v->empty()) bad_value("messages", "the array is empty.");
  std::vector<ChatMessage> out;
  for (size_t i = 0; i < v->size(); ++i) {
    const json& m = (*v)[i];
    const std::string where = fmt::format("messages[{}]", i);
    if (!m.is_object()) wrong_type(where, "an object", m);
    const json* role = field(m, "role");
    if (!role || !role->is_string()) wrong_type(where + ".role", "a string", role ? *role : json());
    std::string r = role->get<std::string>();
    if (r == "developer") r = "system";  // OpenAI's newer name for the system role
    if (r != "system" && r != "user" && r != "assistant" && r != "tool")
      unsupported(where + ".role",
                  fmt::format("role '{}'; use system, user, assistant or tool.", r));
    check_message_fields(m, where);
    auto content = m.find("content");
    ChatMessage msg{r, content_text(content == m.end() ? json() : *content, i)};
    if (const json* calls = field(m, "tool_calls")) {
      if (r != "assistant") unsupported(where + ".tool_calls", "only assistant messages have it.");
      msg.tool_calls = tool_calls(*calls, where + ".tool_calls");
    }
    if (const json* id = field(m, "tool_call_id")) {
      if (r != "tool") unsupported(where + ".tool_call_id", "only tool messages have it.");
      if (!id->is_string()) wrong_type(where + ".tool_call_id", "a string", *id);
      msg.tool_call_id = id->get<std::string>();
    } else if (r == "tool") {
      throw ApiError::invalid(fmt::format("Missing required parameter: '{}.tool_call_id'.", where),
                              where + ".tool_call_id", "missing_required_parameter");
    }
    out.push_back(std::move(msg));
  }
  return out;
}

void completion_prompt(const json& body, CompletionRequest& r) {
  const json* v = field(body, "prompt");
  if (!v)
    throw ApiError::invalid("Missing required parameter: 'prompt'.", "prompt",
                            "missing_required_parameter");
  const json* p = v;
  // A batch of prompts is one prompt per choice; this server makes one choice per request.
  if (p->is_array() && !p->empty() && ((*p)[0].is_string() || (*p)[0].is_array())) {
    if (p->size() != 1) unsupported("prompt", "send one prompt per request.");
    p = &(*p)[0];
  }
  if (p->is_string()) {
    r.prompt_text = p->get<std::string>();
    return;
  }
  if (!p->is_array() || p->empty())
    wrong_type("prompt", "a string, an array of token ids or a one-element array", *v);
  for (const json& id : *p) {
    if (!id.is_number_integer() && !id.is_number_unsigned())
      wrong_type("prompt", "a string or an array of integer token ids", *v);
    const int64_t x = id.get<int64_t>();
    if (x < 0 || x > std::numeric_limits<int32_t>::max())
      bad_value("prompt", fmt::format("token id {} is out of range.", x));
    r.prompt_ids.push_back(int32_t(x));
  }
  r.prompt_is_ids = true;
}

// logprobs: chat takes a boolean and top_logprobs (0..20); completions an integer (0..5), the
// number of alternatives, where null or absent means none at all.
void logprob_fields(const json& body, CompletionRequest& r) {
  if (r.endpoint == Endpoint::kChat) {
    r.logprobs = boolean(body, "logprobs", false);
    r.top_logprobs = int(integer(body, "top_logprobs", 0, 0, 20));
    if (r.top_logprobs > 0 && !r.logprobs)
      bad_value("top_logprobs", "'logprobs' must be true when top_logprobs is set.");
    return;
  }
  const json* v = field(body, "logprobs");
  if (!v) return;
  if (v->is_boolean()) {  // some clients send a boolean here too
    r.logprobs = v->get<bool>();
    return;
  }
  r.logprobs = true;
  r.top_logprobs = int(integer(body, "logprobs", 0, 0, 5));
}

// response_format and tools need the client's key order (a schema's properties are generated
// in it; the template prints the tools as written), which json sorts: they are read from
// `ordered`, the same body parsed keeping the order.
void format_and_tools(const nlohmann::ordered_json& ordered, CompletionRequest& r) {
  if (auto it = ordered.find("response_format"); it != ordered.end() && !it->is_null()) {
    if (!it->is_object()) wrong_type("response_format", "an object", json::parse(it->dump()));
    try {
      r.format = JsonSchema::from_response_format(*it);
    } catch (const Error& e) {
      bad_value("response_format", e.what());
    }
  }
  std::string choice = "auto";
  if (auto c = ordered.find("tool_choice"); c != ordered.end() && !c->is_null()) {
    if (c->is_object()) {  // {"type": "function", "function": {"name": …}}
      auto f = c->find("function");
      if (c->value("type", "") != "function" || f == c->end() || !f->is_object() ||
          !f->contains("name") || !(*f)["name"].is_string())
        bad_value("tool_choice",
                  "a named tool choice is {\"type\": \"function\", "
                  "\"function\": {\"name\": …}}.");
      choice = "required";
      r.tool_forced = (*f)["name"].get<std::string>();
    } else if (c->is_string()) {
      choice = c->get<std::string>();
      if (choice != "auto" && choice != "none" && choice != "required")
        bad_value("tool_choice", fmt::format("'{}' is not one of none, auto, required.", choice));
    } else {
      wrong_type("tool_choice", "a string or an object", json::parse(c->dump()));
    }
  }
  r.tool_required = choice == "required";
  auto tools = ordered.find("tools");
  if (tools == ordered.end() || tools->is_null()) {
    if (r.tool_required)
      bad_value("tool_choice", "a tool call is required, but no tools are given.");
    return;
  }
  if (!tools->is_array()) wrong_type("tools", "an array", json::parse(tools->dump()));
  for (size_t i = 0; i < tools->size(); ++i) {
    const auto& t = (*tools)[i];
    const std::string at = fmt::format("tools[{}]", i);
    if (!t.is_object() || t.value("type", "") != "function")
      bad_value(at, "each tool must be {\"type\": \"function\", \"function\": {…}}.");
    auto f = t.find("function");
    if (f == t.end() || !f->is_object() || !f->contains("name") || !(*f)["name"].is_string())
      bad_value(at + ".function", "it needs a string 'name'.");
    if (f->contains("parameters") && !(*f)["parameters"].is_object())
      wrong_type(at + ".function.parameters", "an object", json::parse((*f)["parameters"].dump()));
  }
  if (choice != "none" && !tools->empty()) r.tools_json = tools->dump();
  if (r.tool_required && r.tools_json.empty())
    bad_value("tool_choice", "a tool call is required, but no tools are given.");
  if (!r.tool_forced.empty() && std::none_of(tools->begin(), tools->end(), [&](const auto& t) {
        return t["function"]["name"] == r.tool_forced;
      }))
    bad_value("tool_choice", fmt::format("no tool is named '{}'.", r.tool_forced));
}

}  // namespace

SamplerParams openai_sampler_defaults() {
  SamplerParams p;  // the OpenAI API's defaults: temperature 1, no truncation, no penalty
  p.temperature = 1.0f, p.top_k = 0, p.top_p = 1.0f, p.min_p = 0.0f;
  p.repeat_penalty = 1.0f, p.repeat_last_n = 64;
  return p;
}

CompletionRequest parse_request(const std::string& text, Endpoint ep, const RequestDefaults& d) {
  if (!json_depth_ok(text))
    throw ApiError::invalid(fmt::format("The request body nests arrays and objects more than {} "
                                        "levels deep.",
                                        kMaxJsonDepth),
                            "", "invalid_json");
  json body;
  try {
    body = json::parse(text);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw ApiError::invalid(fmt::format("The request body is not valid JSON: {}", e.what()), "",
                            "invalid_json");
  }
  if (!body.is_object())
    throw ApiError::invalid(
        fmt::format("The request body must be a JSON object, not {}.", body.type_name()), "",
        "invalid_json");
  CompletionRequest r;
  r.endpoint = ep;
  if (const json* m = field(body, "model")) {
    if (!m->is_string()) wrong_type("model", "a string", *m);
    r.model = m->get<std::string>();
  }
  if (ep == Endpoint::kChat)
    r.messages = chat_messages(body);
  else
    completion_prompt(body, r);
  check_fields(body, ep);
  r.sampler = sampler_params(body, d);
  constexpr int64_t kMax = std::numeric_limits<int>::max();
  // The legacy completions endpoint defaults to 16 tokens; chat runs until the turn ends.
  const int64_t max_tokens = integer(body, "max_tokens", ep == Endpoint::kChat ? -1 : 16, 0, kMax);
  r.max_tokens = int(integer(body, "max_completion_tokens", max_tokens, 0, kMax));
  r.stop = stop_strings(body);
  r.stream = boolean(body, "stream", false);
  r.include_usage = stream_options(body);
  r.n = int(integer(body, "n", 1, 1, 16));
  logprob_fields(body, r);
  if (body.contains("response_format") || body.contains("tools") || body.contains("tool_choice"))
    format_and_tools(nlohmann::ordered_json::parse(text), r);
  return r;
}

}  // namespace krafla::server
