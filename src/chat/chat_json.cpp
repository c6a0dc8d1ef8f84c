#include "chat/chat_json.h"

#include <fmt/format.h>

#include "chat/chat_text.h"
#include "krafla/error.h"
#include "krafla/json_depth.h"

namespace krafla {
namespace {

void dump_to(std::string& out, const OrderedJson& v, int indent, int depth) {
  if (!v.is_structured()) {
    out += v.dump(-1, ' ', false, OrderedJson::error_handler_t::replace);
    return;
  }
  if (v.empty()) {
    out += v.is_object() ? "{}" : "[]";
    return;
  }
  out += v.is_object() ? '{' : '[';
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it, first = false) {
    if (!first) out += indent < 0 ? ", " : ",";
    if (indent >= 0) out += '\n' + std::string(size_t((depth + 1) * indent), ' ');
    if (v.is_object()) {
      dump_to(out, OrderedJson(it.key()), indent, depth + 1);
      out += ": ";
    }
    dump_to(out, *it, indent, depth + 1);
  }
  if (indent >= 0) out += '\n' + std::string(size_t(depth * indent), ' ');
  out += v.is_object() ? '}' : ']';
}

// Python's str.isprintable() for the code points tool schemas may hold: false for the
// categories Cc, Cf, Zl, Zp, Zs (but the space), Cs and Co.
bool py_printable(char32_t c) {
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x8E2 ||
      c == 0x180E || c == 0x1680)
    return false;
  if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
      (c >= 0x205F && c <= 0x2064) || (c >= 0x2066 && c <= 0x206F) || c == 0x3000)
    return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) || c == 0xFFFE ||
      c == 0xFFFF)
    return false;
  return !(c == 0x110BD || c == 0x110CD || (c >= 0x1BCA0 && c <= 0x1BCA3) ||
           (c >= 0x1D173 && c <= 0x1D17A) || c == 0xE0001 || (c >= 0xE0020 && c <= 0xE007F) ||
           c >= 0xF0000);
}

std::string repr_string(std::string_view s) {
  const char q = s.find('\'') != s.npos && s.find('"') == s.npos ? '"' : '\'';
  std::string out(1, q);
  for (size_t p = 0, n = 0; p < s.size(); p += n) {
    const char32_t c = utf8_at(s, p, n);
    if (c == char32_t(q) || c == U'\\')
      out += {'\\', char(c)};
    else if (c == U'\t' || c == U'\n' || c == U'\r')
      out += c == U'\t' ? "\\t" : c == U'\n' ? "\\n" : "\\r";
    else if (!py_printable(c))
      out += c < 0x100     ? fmt::format("\\x{:02x}", uint32_t(c))
             : c < 0x10000 ? fmt::format("\\u{:04x}", uint32_t(c))
                           : fmt::format("\\U{:08x}", uint32_t(c));
    else
      out.append(s.substr(p, n));
  }
  return out + q;
}

}  // namespace

std::string py_dumps(const OrderedJson& v, int indent) {
  std::string out;
  dump_to(out, v, indent, 0);
  return out;
}

std::string py_repr(const OrderedJson& v) {
  if (v.is_string()) return repr_string(v.get_ref<const std::string&>());
  if (v.is_boolean()) return v.get<bool>() ? "True" : "False";
  if (v.is_null()) return "None";
  if (!v.is_structured()) return v.dump();
  std::string out(1, v.is_object() ? '{' : '[');
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it != v.begin()) out += ", ";
    if (v.is_object()) out += repr_string(it.key()) + ": ";
    out += py_repr(*it);
  }
  return out + (v.is_object() ? '}' : ']');
}

std::string py_str(const OrderedJson& v) {
  return v.is_string() ? v.get<std::string>() : py_repr(v);
}

std::optional<OrderedJson> parse_json(std::string_view text) {
  if (!json_depth_ok(text)) return std::nullopt;
  OrderedJson j = OrderedJson::parse(text, nullptr, false);
  if (j.is_discarded()) return std::nullopt;
  return j;
}

std::vector<OrderedJson> parse_tools(std::string_view tools_json, std::string_view tmpl) {
  if (tools_json.find_first_not_of(" \t\n\r") == tools_json.npos) return {};
  const auto j = parse_json(tools_json);
  if (!j || !j->is_array())
    throw Error(fmt::format("chat template {}: the tools are not a JSON array", tmpl));
  return std::vector<OrderedJson>(j->begin(), j->end());
}

OrderedJson call_arguments(const ToolCall& c) {
  if (auto j = parse_json(c.arguments)) return *j;
  return OrderedJson(c.arguments);
}

}  // namespace krafla
