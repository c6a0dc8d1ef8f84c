// The compiled form of a JsonSchema (json_schema.cpp builds it) and the byte step of the
// pushdown matcher over it (json_matcher.cpp), shared with the token filter's trie walk.
#pragma once
#include <array>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "krafla/json_constraint.h"

namespace krafla::json_detail {

enum class Kind : uint8_t {
  Root,        // the document: optional leading whitespace, one value, nothing after
  Union,       // alternatives told apart by their first byte (type lists, anyOf, any value)
  Object,      // listed properties in order
  FreeObject,  // any keys, values of one node
  Array,
  String,
  Number,
  Enum,  // one of fixed texts (enum, const, true, false, null)
};

constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
// Nodes every grammar has at these indices.
constexpr uint32_t kRootNode = 0;
constexpr uint32_t kKeyNode = 1;  // the free string of a FreeObject's keys

struct Property {
  std::string key;  // the key as JSON text, quotes included (dump() of the name)
  uint32_t node;
  bool required;
};

struct Node {
  Kind kind = Kind::Root;
  bool integer = false;    // Number: no fraction or exponent
  bool capped = false;     // free-form container: refused kMaxDepth deep
  uint32_t child = kNone;  // Root: the value; FreeObject: the values; Array: the items
  uint32_t min = 0;        // Array: items; String: code points
  uint32_t max = kNone;
  std::vector<Property> props;          // Object
  std::vector<uint32_t> required_from;  // Object: first required index >= i (props.size(): none)
  std::vector<std::string> texts;       // Enum: compact JSON texts, sorted, distinct
  std::array<uint32_t, 256> pick{};     // Union: the alternative a first byte starts (kNone)
};

struct Grammar {
  std::vector<Node> nodes;
};

// The lead byte of a UTF-8 sequence: how many continuation bytes follow and the range of the
// first (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF); 0 when invalid.
inline int utf8_lead(uint8_t c, uint8_t& lo, uint8_t& hi) {
  lo = 0x80;
  hi = 0xBF;
  if (c >= 0xC2 && c <= 0xDF) return 1;
  if (c >= 0xE0 && c <= 0xEF) {
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    return 2;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    return 3;
  }
  return 0;
}

// Advances the stack over one byte; false (the stack then unspecified) when it is refused.
bool step(const Grammar& g, std::vector<Frame>& stack, uint8_t byte);
// The stack holds a complete document.
bool complete(const Grammar& g, const std::vector<Frame>& stack);
// Inside a string, between characters, with `room` code points still allowed: then any run of
// plain text (no '"', '\\' or byte < 0x20, whole UTF-8 characters) of at most `room` code points
// is accepted and leaves the state the same kind of place.
bool in_plain_string(const Grammar& g, const std::vector<Frame>& stack, uint32_t* room);

}  // namespace krafla::json_detail
