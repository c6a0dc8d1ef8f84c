// Constrained decoding for OpenAI's response_format ("json_object", "json_schema"): at each
// sampling step only the tokens that keep the reply a prefix of a JSON text matching the schema
// stay allowed, so a reply that ends by itself (not cut by max_tokens) always parses and
// validates.
//
//   JsonSchema s = JsonSchema::parse(schema);   // or any_object(), from_response_format(rf)
//   TokenFilter filter(tokenizer);              // once per vocabulary (it builds a trie)
//   JsonMatcher m(s);                           // once per reply
//   loop: filter.apply(m, logits, end_ids); id = sample(logits);
//         if id is an end id: stop (m.done() was true); else m.accept(tokenizer.piece(id));
//
// The JSON Schema subset (everything else is refused by name, see JsonSchema::parse):
//   type            "object", "array", "string", "number", "integer", "boolean", "null", or a
//                   list of them; absent: the types whose keywords appear, or any value
//   properties, required, additionalProperties
//                   properties are generated in schema order: required ones always, optional
//                   ones may be skipped. Properties not listed are never generated, whatever
//                   additionalProperties says (true, false or a schema). Without "properties"
//                   an object is free-form: any keys, values of the additionalProperties
//                   schema (any JSON value when it is true or absent; false allows only {}).
//   items, minItems, maxItems            arrays (items absent: any JSON value)
//   minLength, maxLength                 strings, counted in Unicode code points (an escape
//                   is one; a surrogate pair \uD83D\uDE00 is one)
//   enum, const     any JSON values, generated as nlohmann's compact dump() (no whitespace,
//                   object keys in the order given, strings escaped as dump() does); with
//                   "type", the values of other types are dropped
//   anyOf           alternatives that start with different bytes (say object | null, string |
//                   number); two that may start alike (two objects) are refused
//   annotations     title, description, $schema, $id, $comment, $defs, definitions, examples,
//                   default, deprecated, readOnly, writeOnly: ignored
//
// The text generated (and accepted):
//   - whitespace (space, tab, CR, LF) wherever JSON allows it except after the top-level
//     value, in runs of at most kMaxWhitespace bytes, so a model cannot loop on it
//   - numbers: -?(0|[1-9][0-9]{0,15})(.[0-9]{1,16})?([eE][+-]?[0-9]{1,2})?: at most 16
//     integer digits, 16 fraction digits and 2 exponent digits (so every number fits a double:
//     parsers such as nlohmann refuse 1e400); "integer" has no fraction or exponent
//   - strings: UTF-8 (no overlong forms, no surrogates), the JSON escapes, no raw control
//     characters, lone surrogate escapes refused
//   - free-form containers (json_object mode, schemas without properties or items) nest at
//     most kMaxDepth deep; schemas themselves at most kMaxSchemaDepth
// Strings without maxLength and free-form containers have no length bound: max_tokens ends
// those (a reply cut by length need not parse, as OpenAI documents).
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace krafla {

class Tokenizer;

namespace json_detail {
struct Grammar;
// One level of the matcher's pushdown stack (the fields' meaning depends on the node's kind:
// see src/runtime/json_matcher.cpp).
struct Frame {
  uint32_t node = 0;  // index into the grammar's nodes
  uint8_t mode = 0;   // position in that node's state machine
  uint8_t ws = 0;     // whitespace bytes in the current run
  uint16_t n = 0;     // digits of the current number part, \u digits, UTF-8 bytes pending
  uint32_t a = 0;     // items, characters, next property, first enum candidate
  uint32_t b = 0;     // key candidate, end of enum candidates, \u value, UTF-8 bounds
  uint32_t off = 0;   // bytes of the key or enum text matched; low-surrogate flag
};
}  // namespace json_detail

constexpr int kMaxWhitespace = 32;  // bytes in one run of insignificant whitespace
constexpr int kMaxDepth = 64;       // free-form arrays and objects nest at most this deep
constexpr int kMaxSchemaDepth = 32;

// A compiled schema. Cheap to copy (the compiled form is shared and immutable).
class JsonSchema {
 public:
  // Any JSON object (response_format json_object).
  static JsonSchema any_object();
  // Throws krafla::Error naming the keyword and its JSON pointer, e.g. "json_schema: keyword
  // 'pattern' at /properties/a is not supported; supported: ...", or what is wrong with a
  // supported one (a bad value, minItems > maxItems, an enum left empty).
  // Properties come in the order the ordered_json holds them; a nlohmann::json converts, but
  // has already sorted its keys (parse the request with ordered_json to keep schema order).
  static JsonSchema parse(const nlohmann::ordered_json& schema);
  static JsonSchema parse_text(std::string_view schema_json);  // throws on bad JSON too
  // The OpenAI response_format object: nullopt for {"type": "text"}, any_object() for
  // "json_object", parse(json_schema.schema) for "json_schema" (any_object() without one).
  static std::optional<JsonSchema> from_response_format(
      const nlohmann::ordered_json& response_format);

 private:
  friend class JsonMatcher;
  explicit JsonSchema(std::shared_ptr<const json_detail::Grammar> g);
  std::shared_ptr<const json_detail::Grammar> g_;
};

// The state of one reply: a byte-level pushdown matcher. Every prefix it accepts can still be
// completed to a valid document, so constrained decoding never reaches a dead end.
class JsonMatcher {
 public:
  explicit JsonMatcher(const JsonSchema& schema);
  // Advances over all the bytes, or returns false and leaves the state as it was.
  bool accept(std::string_view bytes);
  bool can_accept(std::string_view bytes) const;
  // The bytes so far are a complete document: end of text may follow. For an object or array
  // at the top nothing else can; a top-level number may still take more digits.
  bool done() const;

 private:
  friend class TokenFilter;
  std::shared_ptr<const json_detail::Grammar> g_;
  std::vector<json_detail::Frame> stack_;
};

// Per-vocabulary precomputation: every token's bytes in a trie, so the allowed set is found by
// walking it with copies of the matcher state, pruned at the first byte refused; inside a
// string, tokens that are plain text (no quote, backslash or control byte, whole UTF-8
// characters) are allowed from a list instead of a walk. Immutable once built: one filter can
// serve concurrent replies.
class TokenFilter {
 public:
  // Special tokens (Tokenizer::is_special) are never allowed inside the JSON.
  explicit TokenFilter(const Tokenizer& tok);
  // pieces[id]: the bytes of token id; an empty piece is never allowed.
  explicit TokenFilter(std::vector<std::string> pieces);
  TokenFilter(TokenFilter&&) noexcept;
  TokenFilter& operator=(TokenFilter&&) noexcept;
  ~TokenFilter();

  int32_t n_tokens() const;
  // The ids whose whole piece the matcher accepts, increasing (no end ids unless they are
  // ordinary tokens it accepts; tokens with empty pieces never).
  std::vector<int32_t> allowed(const JsonMatcher& m) const;
  // Sets logits[id] = -inf for every id not allowed: the end_ids (eos, end of turn) are
  // allowed exactly when m.done(), other ids as allowed() says, other ids >= n_tokens()
  // (padding rows of the output matrix) never. Returns how many ids stay allowed.
  size_t apply(const JsonMatcher& m, std::span<float> logits,
               std::span<const int32_t> end_ids) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace krafla
