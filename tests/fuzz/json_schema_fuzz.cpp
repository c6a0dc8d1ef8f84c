// Fuzz target "json_schema": fields schema | text. Compiling the schema (the JSON-schema subset
// of include/krafla/json_constraint.h) succeeds or throws krafla::Error naming what it refuses;
// a schema that compiles drives a matcher over the text in pieces (can_accept must agree with
// accept) and a token filter over a small vocabulary, whose allowed tokens must each be
// accepted by a copy of the matcher.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "krafla/error.h"
#include "krafla/json_constraint.h"

namespace {

const std::vector<std::string>& pieces() {
  static const std::vector<std::string> p{
      "{",     "}",    "[",   "]",   ",",     ":",  "\"",   " ",  "\n",    "true",
      "false", "null", "0",   "1",   "-",     ".",  "e",    "12", "\"a\"", "\"name\"",
      ": ",    "{\"",  "\":", "\\",  "\\u00", "é",  "a",    "b",  "x",     "\":\"",
      "},",    "],",   "\t",  "\"}", "1.5",   "E+", "\xff", ""};
  return p;
}

const krafla::TokenFilter& filter() {
  static const krafla::TokenFilter f(pieces());
  return f;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  krafla::fuzz::FuzzInput in(data, size);
  const uint8_t step = 1 + in.byte() % 8;
  const std::string_view schema = in.field();
  const std::string_view text = in.rest();
  try {
    const auto s = krafla::JsonSchema::parse_text(schema);
    krafla::JsonMatcher m(s);
    for (size_t i = 0; i < text.size(); i += step) {
      const auto piece = text.substr(i, step);
      const bool can = m.can_accept(piece);
      if (m.accept(piece) != can) std::abort();  // can_accept and accept disagree
      if (!can) break;
      for (int32_t id : filter().allowed(m)) {
        krafla::JsonMatcher c = m;
        if (!c.accept(pieces()[id])) std::abort();  // the filter allowed a token it refuses
      }
    }
    (void)m.done();
  } catch (const krafla::Error&) {
  }
  return 0;
}
