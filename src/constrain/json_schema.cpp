// Compiles the supported JSON Schema subset (json_constraint.h lists it) into the matcher's
// nodes, refusing every other keyword by name, and checking that every node can produce at
// least one value: the matcher relies on it never to accept a prefix it cannot finish.
#include <fmt/format.h>

#include <algorithm>
#include <bitset>
#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string_view>

#include "constrain/json_grammar.h"
#include "krafla/error.h"
#include "krafla/json_depth.h"

namespace krafla {
namespace {

using json = nlohmann::ordered_json;
using json_detail::Grammar;
using json_detail::Kind;
using json_detail::kNone;
using json_detail::Node;
using json_detail::Property;

constexpr std::string_view kSupported =
    "type, properties, required, additionalProperties, items, minItems, maxItems, minLength, "
    "maxLength, enum, const, anyOf";
const std::set<std::string_view> kKeywords = {
    "type",      "properties", "required", "additionalProperties",
    "items",     "minItems",   "maxItems", "minLength",
    "maxLength", "enum",       "const",    "anyOf"};
// Annotations: they describe, they do not constrain ($defs only matters through $ref, which is
// refused by name).
const std::set<std::string_view> kAnnotations = {
    "title",       "description", "$schema", "$id",        "$comment", "$defs",
    "definitions", "examples",    "default", "deprecated", "readOnly", "writeOnly"};

enum TypeBit : unsigned {
  kObject = 1,
  kArray = 2,
  kString = 4,
  kNumber = 8,
  kInteger = 16,
  kBoolean = 32,
  kNull = 64,
  kAllTypes = 127,
};

constexpr std::pair<std::string_view, unsigned> kTypeNames[] = {
    {"object", kObject},   {"array", kArray},     {"string", kString}, {"number", kNumber},
    {"integer", kInteger}, {"boolean", kBoolean}, {"null", kNull}};

std::string shown(const std::string& path) { return path.empty() ? "(root)" : path; }

// A JSON pointer token: '~' and '/' escaped as RFC 6901 says.
std::string token(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

// "json_schema: <subject> at <path> <problem>", so every message names the place.
[[noreturn]] void fail(const std::string& path, std::string_view subject,
                       std::string_view problem) {
  throw Error(fmt::format("json_schema: {} at {} {}", subject, shown(path), problem));
}

unsigned type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return kObject;
    case json::value_t::array:
      return kArray;
    case json::value_t::string:
      return kString;
    case json::value_t::boolean:
      return kBoolean;
    case json::value_t::null:
      return kNull;
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return kInteger | kNumber;
    default:
      return v.is_number() && std::trunc(v.get<double>()) == v.get<double>() ? kInteger | kNumber
                                                                             : kNumber;
  }
}

uint32_t count(const json& s, const char* key, const std::string& path, uint32_t def) {
  auto it = s.find(key);
  if (it == s.end()) return def;
  if (!it->is_number_unsigned() && !(it->is_number_integer() && *it >= 0))
    fail(path, fmt::format("'{}'", key),
         fmt::format("must be a non-negative integer, not {}", it->dump()));
  return uint32_t(std::min<uint64_t>(it->get<uint64_t>(), kNone - 1));
}

// n.min and n.max from a pair of keywords (absent: 0 and unbounded); min > max allows nothing.
void bounds(Node& n, const json& s, const std::string& path, const char* min, const char* max) {
  n.min = count(s, min, path, 0);
  n.max = count(s, max, path, kNone);
  if (n.min > n.max)
    fail(path, fmt::format("'{}'", min), fmt::format("{} is more than '{}' {}", n.min, max, n.max));
}

std::string byte_name(int c) {
  return c > 0x20 && c < 0x7F ? fmt::format("'{}'", char(c)) : fmt::format("byte 0x{:02X}", c);
}

class Compiler {
 public:
  Compiler() {
    g_.nodes.push_back(Node{});  // kRootNode
    Node key;
    key.kind = Kind::String;
    add(std::move(key));  // kKeyNode
  }

  std::shared_ptr<const Grammar> finish(uint32_t value) {
    g_.nodes[json_detail::kRootNode].child = value;
    return std::make_shared<const Grammar>(std::move(g_));
  }

  uint32_t compile(const json& s, const std::string& path, int depth);
  uint32_t any_value();
  uint32_t any_object(uint32_t values, bool capped) {
    Node n;
    n.kind = Kind::FreeObject;
    n.child = values;
    n.capped = capped;
    return add(std::move(n));
  }

 private:
  uint32_t add(Node n) {
    g_.nodes.push_back(std::move(n));
    return uint32_t(g_.nodes.size() - 1);
  }
  uint32_t add_kind(Kind k) {
    Node n;
    n.kind = k;
    return add(std::move(n));
  }
  uint32_t enumeration(std::vector<std::string> texts) {
    std::sort(texts.begin(), texts.end());
    texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
    Node n;
    n.kind = Kind::Enum;
    n.texts = std::move(texts);
    return add(std::move(n));
  }
  std::bitset<256> first_bytes(uint32_t id) const;
  void fill_union(uint32_t id, const std::vector<uint32_t>& alts,
                  const std::vector<std::string>& paths);
  uint32_t make_union(const std::vector<uint32_t>& alts, const std::vector<std::string>& paths) {
    if (alts.size() == 1) return alts[0];
    const uint32_t id = add_kind(Kind::Union);
    fill_union(id, alts, paths);
    return id;
  }
  uint32_t compile_types(const json& s, const std::string& path, int depth, unsigned types);
  uint32_t compile_enum(const json& s, const std::string& path, unsigned types);
  uint32_t compile_any_of(const json& s, const std::string& path, int depth);
  uint32_t compile_object(const json& s, const std::string& path, int depth);
  uint32_t compile_array(const json& s, const std::string& path, int depth);
  uint32_t compile_string(const json& s, const std::string& path);

  Grammar g_;
  uint32_t any_ = kNone;  // the "any JSON value" union, built once
};

std::bitset<256> Compiler::first_bytes(uint32_t id) const {
  const Node& n = g_.nodes[id];
  std::bitset<256> out;
  switch (n.kind) {
    case Kind::Object:
    case Kind::FreeObject:
      out.set('{');
      break;
    case Kind::Array:
      out.set('[');
      break;
    case Kind::String:
      out.set('"');
      break;
    case Kind::Number:
      out.set('-');
      for (int c = '0'; c <= '9'; ++c) out.set(c);
      break;
    case Kind::Enum:
      for (const std::string& t : n.texts) out.set(uint8_t(t[0]));
      break;
    case Kind::Union:
      for (int c = 0; c < 256; ++c) out[c] = n.pick[c] != kNone;
      break;
    case Kind::Root:
      break;
  }
  return out;
}

// The matcher picks an alternative by the value's first byte, so two that may start with the
// same byte (two objects, integer and number) would need a nondeterministic matcher: refused.
void Compiler::fill_union(uint32_t id, const std::vector<uint32_t>& alts,
                          const std::vector<std::string>& paths) {
  std::array<uint32_t, 256> pick, owner;
  pick.fill(kNone);
  for (size_t i = 0; i < alts.size(); ++i) {
    const std::bitset<256> first = first_bytes(alts[i]);
    for (int c = 0; c < 256; ++c) {
      if (!first[c]) continue;
      if (pick[c] != kNone)
        throw Error(fmt::format(
            "json_schema: the anyOf alternatives at {} and {} can both start with {}; only "
            "alternatives that start differently are supported (say an object and null)",
            shown(paths[owner[c]]), shown(paths[i]), byte_name(c)));
      pick[c] = alts[i];
      owner[c] = uint32_t(i);
    }
  }
  g_.nodes[id].pick = pick;
}

uint32_t Compiler::any_value() {
  if (any_ != kNone) return any_;
  any_ = add_kind(Kind::Union);  // first: the containers below refer to it
  Node array;
  array.kind = Kind::Array;
  array.child = any_;
  array.capped = true;
  const std::vector<uint32_t> alts = {any_object(any_, true), add(std::move(array)),
                                      add_kind(Kind::String), add_kind(Kind::Number),
                                      enumeration({"true", "false", "null"})};
  fill_union(any_, alts, std::vector<std::string>(alts.size()));
  return any_;
}

uint32_t Compiler::compile(const json& s, const std::string& path, int depth) {
  if (depth > kMaxSchemaDepth)
    fail(path, "the schema", fmt::format("nests deeper than {} levels", kMaxSchemaDepth));
  if (s.is_boolean()) {
    if (!s.get<bool>()) fail(path, "the schema false", "allows no value");
    return any_value();
  }
  if (!s.is_object()) fail(path, "the schema", fmt::format("is not an object but {}", s.dump()));
  for (const auto& [key, value] : s.items())
    if (!kKeywords.count(key) && !kAnnotations.count(key))
      fail(path, fmt::format("keyword '{}'", key),
           fmt::format("is not supported; supported: {} (annotations such as title and "
                       "description are ignored)",
                       kSupported));
  if (s.contains("anyOf")) return compile_any_of(s, path, depth);

  unsigned types = 0;
  if (auto t = s.find("type"); t != s.end()) {
    const json names = t->is_array() ? *t : json::array({*t});
    for (const json& name : names) {
      auto it = std::find_if(std::begin(kTypeNames), std::end(kTypeNames), [&](const auto& p) {
        return name.is_string() && p.first == name.get<std::string>();
      });
      if (it == std::end(kTypeNames))
        fail(path, fmt::format("'type' {}", name.dump()), "is not a JSON Schema type");
      types |= it->second;
    }
    if (types == 0) fail(path, "'type'", "is an empty list");
  }
  if (s.contains("enum") || s.contains("const"))
    return compile_enum(s, path, types ? types : unsigned(kAllTypes));
  if (types == 0) {  // the types the keywords present apply to; none: any value
    for (const char* k : {"properties", "required", "additionalProperties"})
      if (s.contains(k)) types |= kObject;
    for (const char* k : {"items", "minItems", "maxItems"})
      if (s.contains(k)) types |= kArray;
    for (const char* k : {"minLength", "maxLength"})
      if (s.contains(k)) types |= kString;
    if (types == 0) return any_value();
  }
  return compile_types(s, path, depth, types);
}

uint32_t Compiler::compile_types(const json& s, const std::string& path, int depth,
                                 unsigned types) {
  std::vector<uint32_t> alts;
  if (types & kObject) alts.push_back(compile_object(s, path, depth));
  if (types & kArray) alts.push_back(compile_array(s, path, depth));
  if (types & kString) alts.push_back(compile_string(s, path));
  if (types & (kNumber | kInteger)) {
    alts.push_back(add_kind(Kind::Number));
    g_.nodes.back().integer = !(types & kNumber);  // integer is a subset of number
  }
  if (types & kBoolean) alts.push_back(enumeration({"false", "true"}));
  if (types & kNull) alts.push_back(enumeration({"null"}));
  return make_union(alts, std::vector<std::string>(alts.size(), path));
}

uint32_t Compiler::compile_enum(const json& s, const std::string& path, unsigned types) {
  const bool is_enum = s.contains("enum");
  const char* name = is_enum ? "enum" : "const";
  for (const auto& [key, value] : s.items())
    if (key != name && key != "type" && !kAnnotations.count(key))
      fail(path, fmt::format("keyword '{}' next to '{}'", key, name), "is not supported");
  const json& v = s.at(name);
  if (is_enum && (!v.is_array() || v.empty())) fail(path, "'enum'", "must be a non-empty array");
  std::vector<std::string> texts;
  for (const json& value : is_enum ? v : json::array({v}))
    if (type_of(value) & types) texts.push_back(value.dump());
  if (texts.empty()) fail(path, fmt::format("'{}'", name), "has no value of the schema's 'type'");
  return enumeration(std::move(texts));
}

uint32_t Compiler::compile_any_of(const json& s, const std::string& path, int depth) {
  for (const auto& [key, value] : s.items())
    if (key != "anyOf" && !kAnnotations.count(key))
      fail(path, fmt::format("keyword '{}' next to 'anyOf'", key),
           "is not supported (put it inside each alternative)");
  const json& v = s.at("anyOf");
  if (!v.is_array() || v.empty()) fail(path, "'anyOf'", "must be a non-empty array");
  std::vector<uint32_t> alts;
  std::vector<std::string> paths;
  for (size_t i = 0; i < v.size(); ++i) {
    paths.push_back(fmt::format("{}/anyOf/{}", path, i));
    alts.push_back(compile(v[i], paths.back(), depth + 1));
  }
  return make_union(alts, paths);
}

uint32_t Compiler::compile_object(const json& s, const std::string& path, int depth) {
  std::vector<std::string> required;
  if (auto r = s.find("required"); r != s.end()) {
    if (!r->is_array()) fail(path, "'required'", "must be an array of strings");
    for (const json& name : *r) {
      if (!name.is_string()) fail(path, "'required'", "must be an array of strings");
      required.push_back(name.get<std::string>());
    }
  }
  const auto props = s.find("properties");
  if (props != s.end() && !props->is_object()) fail(path, "'properties'", "must be an object");
  const auto extra = s.find("additionalProperties");
  if (extra != s.end() && !extra->is_boolean() && !extra->is_object())
    fail(path, "'additionalProperties'", "must be a boolean or a schema");
  for (const std::string& name : required)
    if (props == s.end() || !props->contains(name))
      fail(path, fmt::format("'required' property '{}'", name), "is not in 'properties'");
  if (props == s.end()) {  // free-form: any keys, values of additionalProperties
    if (extra == s.end() || *extra == true) return any_object(any_value(), false);
    if (extra->is_object())
      return any_object(compile(*extra, path + "/additionalProperties", depth + 1), false);
  }
  Node n;  // listed properties only: others are never generated
  n.kind = Kind::Object;
  if (props != s.end()) {
    for (const auto& [name, sub] : props->items()) {
      const uint32_t child = compile(sub, path + "/properties/" + token(name), depth + 1);
      const bool req = std::find(required.begin(), required.end(), name) != required.end();
      n.props.push_back(Property{json(name).dump(), child, req});
    }
  }
  const uint32_t np = uint32_t(n.props.size());
  n.required_from.assign(np + 1, np);
  for (uint32_t i = np; i-- > 0;)
    n.required_from[i] = n.props[i].required ? i : n.required_from[i + 1];
  return add(std::move(n));
}

uint32_t Compiler::compile_array(const json& s, const std::string& path, int depth) {
  Node n;
  n.kind = Kind::Array;
  bounds(n, s, path, "minItems", "maxItems");
  if (auto it = s.find("items"); it == s.end()) {
    n.child = any_value();
  } else {
    if (it->is_array()) fail(path, "'items' as an array (tuple form)", "is not supported");
    n.child = compile(*it, path + "/items", depth + 1);
  }
  return add(std::move(n));
}

uint32_t Compiler::compile_string(const json& s, const std::string& path) {
  Node n;
  n.kind = Kind::String;
  bounds(n, s, path, "minLength", "maxLength");
  return add(std::move(n));
}

}  // namespace

JsonSchema::JsonSchema(std::shared_ptr<const json_detail::Grammar> g) : g_(std::move(g)) {}

JsonSchema JsonSchema::any_object() {
  Compiler c;
  return JsonSchema(c.finish(c.any_object(c.any_value(), false)));
}

JsonSchema JsonSchema::parse(const json& schema) {
  Compiler c;
  try {
    return JsonSchema(c.finish(c.compile(schema, "", 0)));
  } catch (const nlohmann::json::exception& e) {  // a value of an unexpected JSON type
    throw Error(fmt::format("json_schema: {}", e.what()));
  }
}

JsonSchema JsonSchema::parse_text(std::string_view schema_json) {
  if (!json_depth_ok(schema_json))
    throw Error(fmt::format("json_schema: nested more than {} levels deep", kMaxJsonDepth));
  json schema;
  try {
    schema = json::parse(schema_json);
  } catch (const json::exception& e) {  // parse_error, or out_of_range for a number like 1e999
    throw Error(fmt::format("json_schema: not valid JSON: {}", e.what()));
  }
  return parse(schema);
}

std::optional<JsonSchema> JsonSchema::from_response_format(const json& rf) {
  const auto type = rf.is_object() ? rf.find("type") : rf.end();
  if (!rf.is_object() || type == rf.end() || !type->is_string())
    throw Error("response_format: must be an object with a string 'type'");
  const std::string t = type->get<std::string>();
  if (t == "text") return std::nullopt;
  if (t == "json_object") return any_object();
  if (t != "json_schema")
    throw Error(fmt::format(
        "response_format: type '{}' is not supported; supported: text, json_object, json_schema",
        t));
  const auto js = rf.find("json_schema");
  if (js == rf.end() || !js->is_object())
    throw Error("response_format: 'json_schema' must be an object holding the 'schema'");
  const auto schema = js->find("schema");
  if (schema == js->end()) return any_object();
  return parse(*schema);
}

}  // namespace krafla
