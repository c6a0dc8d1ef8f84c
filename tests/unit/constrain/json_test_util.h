// Test helpers for the JSON constraint tests: an independent validator of the supported JSON
// Schema subset (written from the JSON Schema spec, sharing nothing with src/runtime), and a
// byte-by-byte driver of the matcher.
#pragma once
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "krafla/json_constraint.h"

namespace krafla::json_test {

using ojson = nlohmann::ordered_json;

// A schema using every supported keyword, every value of it bounded (strings, arrays, numbers):
// constrained generation under it always ends.
inline const char* kOrderSchema = R"({
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "title": "order", "description": "an order",
  "type": "object",
  "properties": {
    "id": {"type": "integer"},
    "status": {"enum": ["new", "paid", "shipped", 7, null]},
    "note": {"type": ["string", "null"], "maxLength": 8},
    "price": {"type": "number"},
    "items": {"type": "array", "minItems": 1, "maxItems": 3, "items": {
      "type": "object",
      "properties": {"sku": {"type": "string", "minLength": 2, "maxLength": 4},
                     "qty": {"type": "integer"}, "gift": {"type": "boolean"}},
      "required": ["sku", "qty"], "additionalProperties": false}},
    "kind": {"const": "order"},
    "tags": {"type": "array", "maxItems": 2, "items": {"enum": ["a", "b"]}},
    "extra": {"anyOf": [{"type": "object", "properties": {"n": {"type": "integer"}},
                         "additionalProperties": false},
                        {"type": "null"}]}
  },
  "required": ["id", "status", "items", "kind"],
  "additionalProperties": false
})";

// Code points of valid UTF-8: every byte that is not a continuation byte starts one.
inline size_t code_points(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (uint8_t(c) & 0xC0) != 0x80;
  return n;
}

inline bool has_type(const nlohmann::json& v, const std::string& t) {
  if (t == "object") return v.is_object();
  if (t == "array") return v.is_array();
  if (t == "string") return v.is_string();
  if (t == "boolean") return v.is_boolean();
  if (t == "null") return v.is_null();
  if (t == "number") return v.is_number();
  if (t == "integer")
    return v.is_number_integer() ||
           (v.is_number_float() && std::trunc(v.get<double>()) == v.get<double>());
  return false;
}

// Whether v satisfies schema (type, properties, required, additionalProperties, items,
// min/maxItems, min/maxLength in code points, enum, const, anyOf).
inline bool validate(const nlohmann::json& v, const ojson& schema) {
  if (schema.is_boolean()) return schema.get<bool>();
  if (auto it = schema.find("anyOf"); it != schema.end()) {
    for (const ojson& alt : *it)
      if (validate(v, alt)) return true;
    return false;
  }
  if (auto it = schema.find("enum"); it != schema.end()) {
    bool found = false;
    for (const ojson& e : *it) found |= nlohmann::json::parse(e.dump()) == v;
    if (!found) return false;
  }
  if (auto it = schema.find("const"); it != schema.end())
    if (nlohmann::json::parse(it->dump()) != v) return false;
  if (auto it = schema.find("type"); it != schema.end()) {
    bool ok = false;
    if (it->is_string()) ok = has_type(v, it->get<std::string>());
    for (const ojson& t : it->is_array() ? *it : ojson::array()) ok |= has_type(v, t);
    if (!ok) return false;
  }
  if (v.is_object()) {
    const ojson props = schema.value("properties", ojson::object());
    const ojson extra = schema.value("additionalProperties", ojson(true));
    for (const auto& [k, x] : v.items()) {
      if (props.contains(k)) {
        if (!validate(x, props[k])) return false;
      } else if (!validate(x, extra)) {
        return false;
      }
    }
    for (const ojson& r : schema.value("required", ojson::array()))
      if (!v.contains(r.get<std::string>())) return false;
  }
  if (v.is_array()) {
    if (v.size() < schema.value("minItems", size_t(0))) return false;
    if (v.size() > schema.value("maxItems", size_t(-1))) return false;
    for (const auto& x : v)
      if (!validate(x, schema.value("items", ojson(true)))) return false;
  }
  if (v.is_string()) {
    const size_t n = code_points(v.get<std::string>());
    if (n < schema.value("minLength", size_t(0))) return false;
    if (n > schema.value("maxLength", size_t(-1))) return false;
  }
  return true;
}

// The index of the first byte the matcher refuses (it keeps the bytes before), or -1.
inline long first_refused(JsonMatcher& m, std::string_view text) {
  for (size_t i = 0; i < text.size(); ++i)
    if (!m.accept(text.substr(i, 1))) return long(i);
  return -1;
}

inline long first_refused(const JsonSchema& s, std::string_view text) {
  JsonMatcher m(s);
  return first_refused(m, text);
}

// The text is accepted byte by byte and is then a complete document.
inline bool matches(const JsonSchema& s, std::string_view text) {
  JsonMatcher m(s);
  return first_refused(m, text) < 0 && m.done();
}

}  // namespace krafla::json_test
