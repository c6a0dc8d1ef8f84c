// Tool calls read back from a generated reply, in the markup each tool-capable template
// teaches its model (docs/server.md, "Tool calls"). What does not parse stays text: a model that
// botches the markup has still said something, and the client gets to see it.
#include <algorithm>
#include <optional>

#include "chat/chat_json.h"
#include "chat/chat_text.h"
#include "krafla/chat.h"

namespace krafla {
namespace {

constexpr std::string_view kToolOpen = "<tool_call>", kToolClose = "</tool_call>";

// {"name": …, "arguments": {…}} ("parameters" in Llama 3.1's format); the arguments may also
// come as a string that holds a JSON object. The arguments become the text json.dumps writes,
// the form the models are shown, so a call renders back as the model wrote it.
std::optional<ToolCall> json_call(std::string_view text) {
  const auto j = parse_json(text);
  if (!j || !j->is_object()) return std::nullopt;
  const auto name = j->find("name");
  if (name == j->end() || !name->is_string() || name->get_ref<const std::string&>().empty())
    return std::nullopt;
  auto args = j->find("arguments");
  if (args == j->end()) args = j->find("parameters");
  std::string arguments = "{}";
  if (args != j->end() && args->is_object()) {
    arguments = py_dumps(*args);
  } else if (args != j->end() && args->is_string()) {
    const auto inner = parse_json(args->get_ref<const std::string&>());
    if (!inner || !inner->is_object()) return std::nullopt;
    arguments = args->get<std::string>();
  } else if (args != j->end()) {
    return std::nullopt;
  }
  return ToolCall{"", name->get<std::string>(), arguments};
}

const OrderedJson* child(const OrderedJson* j, const char* key) {
  if (!j || !j->is_object()) return nullptr;
  const auto it = j->find(key);
  return it == j->end() ? nullptr : &*it;
}

// Whether the tools list declares parameter `key` of function `fn` a string only ("string", or
// ["string", "null"]), so that its text stays a string even when it reads as a number.
bool string_param(const std::vector<OrderedJson>& tools, const std::string& fn,
                  const std::string& key) {
  for (const auto& t : tools) {
    const OrderedJson* f = child(&t, "function") ? child(&t, "function") : &t;
    const OrderedJson* n = child(f, "name");
    if (!n || *n != fn) continue;
    const OrderedJson* props = child(child(f, "parameters"), "properties");
    const OrderedJson* type = child(child(props, key.c_str()), "type");
    if (!type) return false;
    if (type->is_string()) return *type == "string";
    return type->is_array() && std::find(type->begin(), type->end(), "string") != type->end() &&
           std::all_of(type->begin(), type->end(),
                       [](const OrderedJson& x) { return x == "string" || x == "null"; });
  }
  return false;
}

// A parameter's text as Qwen3.5's template writes values: JSON for mappings and lists, str()
// for the rest (so True, False and None are Python's).
OrderedJson xml_value(const std::string& text, bool is_string) {
  if (is_string) return text;
  if (auto j = parse_json(text)) return *j;
  if (text == "True" || text == "False") return text == "True";
  if (text == "None") return nullptr;
  return text;
}

size_t skip_ws(std::string_view s, size_t p) {
  while (p < s.size() && (s[p] == ' ' || s[p] == '\n' || s[p] == '\t' || s[p] == '\r')) ++p;
  return p;
}

// <function=NAME>\n<parameter=KEY>\nVALUE\n</parameter>\n…</function>: the newline after a
// parameter's tag and the one before its closing tag belong to the markup, not the value.
std::optional<ToolCall> xml_call(std::string_view body, const std::vector<OrderedJson>& tools) {
  size_t p = skip_ws(body, 0);
  if (!body.substr(p).starts_with("<function=")) return std::nullopt;
  size_t e = body.find('>', p);
  if (e == body.npos) return std::nullopt;
  const std::string name = trim(std::string(body.substr(p + 10, e - p - 10)));
  if (name.empty()) return std::nullopt;
  OrderedJson args = OrderedJson::object();
  for (p = skip_ws(body, e + 1); !body.substr(p).starts_with("</function>"); p = skip_ws(body, p)) {
    if (!body.substr(p).starts_with("<parameter=")) return std::nullopt;
    if ((e = body.find('>', p)) == body.npos) return std::nullopt;
    const std::string key(body.substr(p + 11, e - p - 11));
    p = e + 1 + (e + 1 < body.size() && body[e + 1] == '\n');
    if ((e = body.find("</parameter>", p)) == body.npos) return std::nullopt;
    std::string value(body.substr(p, e - p));
    if (value.ends_with('\n')) value.pop_back();
    args[key] = xml_value(value, string_param(tools, name, key));
    p = e + 12;
  }
  if (skip_ws(body, p + 11) != body.size()) return std::nullopt;  // text after </function>
  return ToolCall{"", name, py_dumps(args)};
}

// Every <tool_call>…</tool_call> block after the reasoning (a think block may talk about
// calls), the last one possibly unclosed (the reply stopped at the end of the call).
template <class ParseBody>
ToolCallReply tagged_calls(std::string_view text, ParseBody parse_body) {
  ToolCallReply r;
  const size_t think_end = text.rfind("</think>");
  size_t pos = think_end == text.npos ? 0 : think_end + 8;
  std::string content(text.substr(0, pos));
  for (size_t open; (open = text.find(kToolOpen, pos)) != text.npos;) {
    const size_t body = open + kToolOpen.size();
    const size_t close = std::min(text.find(kToolClose, body), text.size());
    const size_t end = std::min(close + kToolClose.size(), text.size());
    content += text.substr(pos, open - pos);
    if (auto call = parse_body(text.substr(body, close - body)))
      r.calls.push_back(std::move(*call));
    else
      content += text.substr(open, end - open);
    pos = end;
  }
  content += text.substr(pos);
  r.content = r.calls.empty() ? std::string(text) : trim(content);
  return r;
}

// Llama 3.1: the whole reply is the call, maybe after <|python_tag|> (when the decoder writes
// out special tokens).
ToolCallReply json_reply(std::string_view text) {
  std::string body = trim(std::string(text));
  if (body.starts_with("<|python_tag|>")) body = trim(body.substr(14));
  if (auto call = json_call(body)) return {"", {std::move(*call)}};
  return {std::string(text), {}};
}

}  // namespace

ToolCallReply parse_tool_calls(const std::string& template_name, std::string_view text,
                               std::string_view tools_json) {
  switch (chat_template(template_name).tool_format) {
    case ToolFormat::kJsonInTags:
      return tagged_calls(text, json_call);
    case ToolFormat::kXmlInTags: {
      // Types only help: tools that do not parse (render() refuses them) give none.
      const auto j = parse_json(tools_json);
      const std::vector<OrderedJson> tools = j && j->is_array()
                                                 ? std::vector<OrderedJson>(j->begin(), j->end())
                                                 : std::vector<OrderedJson>{};
      return tagged_calls(text, [&](std::string_view b) { return xml_call(b, tools); });
    }
    case ToolFormat::kJsonReply:
      return json_reply(text);
    case ToolFormat::kNone:
      break;
  }
  return {std::string(text), {}};
}

}  // namespace krafla
