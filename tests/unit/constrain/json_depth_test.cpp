// json_depth_ok (krafla/json_depth.h) and the readers that check with it: JSON nested deeper
// than kMaxJsonDepth is refused by name before it is parsed, brackets inside strings do not
// count, and ordinary nesting passes.
#include "krafla/json_depth.h"

#include <gtest/gtest.h>

#include <string>

#include "krafla/error.h"
#include "krafla/json_constraint.h"
#include "krafla/tokenizer.h"

namespace krafla {
namespace {

std::string nested(int levels, const std::string& inner = "") {
  return std::string(size_t(levels), '[') + inner + std::string(size_t(levels), ']');
}

TEST(JsonDepth, CountsArraysAndObjectsUpToTheLimit) {
  EXPECT_TRUE(json_depth_ok(""));
  EXPECT_TRUE(json_depth_ok("{\"a\": [1, {\"b\": [2]}]}"));
  EXPECT_TRUE(json_depth_ok(nested(kMaxJsonDepth)));
  EXPECT_FALSE(json_depth_ok(nested(kMaxJsonDepth + 1)));
  EXPECT_FALSE(json_depth_ok(nested(1000000)));
  // siblings do not add up: depth, not count
  std::string many;
  for (int i = 0; i < 2000; ++i) many += nested(10) + ",";
  EXPECT_TRUE(json_depth_ok("[" + many + "1]"));
  // objects count the same as arrays
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"a\":";
  EXPECT_FALSE(json_depth_ok(objects));
}

TEST(JsonDepth, BracketsInsideStringsDoNotCount) {
  const std::string brackets(size_t(kMaxJsonDepth) * 2, '[');
  EXPECT_TRUE(json_depth_ok("{\"text\": \"" + brackets + "\"}"));
  // an escaped quote does not end the string; an escaped backslash does not escape the quote
  EXPECT_TRUE(json_depth_ok("[\"\\\"" + brackets + "\"]"));
  EXPECT_FALSE(json_depth_ok("[\"\\\\\"" + brackets + "\"]"));
}

TEST(JsonDepth, ReadersRefuseDeepJsonByName) {
  const std::string deep = nested(100000, "1");
  try {
    JsonSchema::parse_text("{\"type\": \"object\", \"properties\": {\"a\": " + deep + "}}");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "json_schema: nested more than 512 levels deep");
  }
  try {
    Tokenizer::from_json("{\"model\": " + deep + "}", "");
    ADD_FAILURE() << "accepted";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "tokenizer.json: nested more than 512 levels deep");
  }
}

}  // namespace
}  // namespace krafla
