// The JSON matcher and schema compiler against nlohmann::json's parser and an independent
// validator of the schema subset (json_test_util.h).
#include "krafla/json_constraint.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "json_test_util.h"
#include "krafla/error.h"

namespace krafla {
namespace {

using json_test::first_refused;
using json_test::matches;
using json_test::ojson;
using json_test::validate;

JsonSchema any_value() { return JsonSchema::parse_text("{}"); }

std::string error_of(const std::string& schema) {
  try {
    JsonSchema::parse_text(schema);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Valid documents within the matcher's limits (short whitespace runs, none at the end).
const std::vector<std::string> kValidDocs = {
    "{}",
    "[]",
    "\"\"",
    "0",
    "-0",
    "1.5e+10",
    "-12.25E-3",
    "true",
    "false",
    "null",
    R"({"a":1,"b":[true,false,null],"c":{"d":"e"}})",
    "[1,[2,[3,[4]]]]",
    R"("esc \" \\ \/ \b \f \n \r \t \u00e9 \uD83D\uDE00 \u0000")",
    "\"UTF-8: \xC3\xA9 \xC3\x9F \xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x98\x80 \xF4\x8F\xBF\xBF\"",
    R"({ "a" : [ 1 , 2 ] , "b" : { } })",
    "{\n  \"pretty\": true,\n  \"list\": [\n    1,\n    2\n  ]\n}",
    "\t\r\n {\"lead\":\"ws\"}",
    "1234567890123456",
    "0.1234567890123456",
    "1e99",
    "-9999999999999999.9999999999999999e-99",
    "[1e5,2E-5,3.0e+2,-0.0]",
    R"({"":"","key with spaces":"x"})",
    R"([{"id":1,"tags":["a","b"]},{"id":22,"tags":[]}])",
};

TEST(JsonMatcherTest, AcceptsValidDocumentsAndIsDoneExactlyWhenNlohmannParses) {
  const JsonSchema any = any_value();
  for (const std::string& doc : kValidDocs) {
    ASSERT_TRUE(nlohmann::json::accept(doc)) << "test data: " << doc;
    JsonMatcher m(any);
    for (size_t i = 0; i < doc.size(); ++i) {
      ASSERT_TRUE(m.accept(doc.substr(i, 1))) << doc << " byte " << i;
      // every prefix: done() iff nlohmann takes it as a whole document
      const std::string prefix = doc.substr(0, i + 1);
      EXPECT_EQ(m.done(), nlohmann::json::accept(prefix)) << "prefix " << prefix;
    }
    EXPECT_TRUE(m.done()) << doc;
    EXPECT_TRUE(JsonMatcher(any).accept(doc)) << doc;
  }
}

TEST(JsonMatcherTest, TruncatedContainersAreNeverDone) {
  const JsonSchema any = any_value();
  int checked = 0;
  for (const std::string& doc : kValidDocs) {
    const size_t start = doc.find_first_of("{[");
    if (start == std::string::npos || doc.find_first_not_of(" \t\r\n") != start) continue;
    for (size_t n = 0; n < doc.size(); ++n) {
      JsonMatcher m(any);
      ASSERT_TRUE(m.accept(doc.substr(0, n))) << doc;
      EXPECT_FALSE(m.done()) << doc.substr(0, n);
      ++checked;
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(JsonMatcherTest, JsonObjectModeTakesOnlyAnObjectAtTheTop) {
  const JsonSchema obj = JsonSchema::any_object();
  EXPECT_TRUE(matches(obj, "{}"));
  EXPECT_TRUE(matches(obj, R"({"a":[1,{"b":null}],"c":"d"})"));
  for (const char* doc : {"[]", "\"x\"", "1", "true", "null"})
    EXPECT_EQ(first_refused(obj, doc), 0) << doc;
}

// Invalid JSON, refused at the first byte after which no valid document can follow.
TEST(JsonMatcherTest, RefusesInvalidJsonAtTheRightByte) {
  const std::vector<std::pair<std::string, long>> cases = {
      {"[1,2,]", 5},
      {R"({"a":1,})", 7},
      {"{a:1}", 1},
      {R"("\x")", 2},
      {R"("\u12G4")", 5},
      {"01", 1},
      {"-01", 2},
      {"[1.]", 3},
      {"1.e5", 2},
      {"-a", 1},
      {"1.5.5", 3},
      {"1ee", 2},
      {"1e+-1", 3},
      {"0x10", 1},
      {"+1", 0},
      {".5", 0},
      {"NaN", 0},
      {"'a'", 0},
      {R"("\ud800")", 7},         // lone high surrogate
      {R"("\udc00")", 4},         // lone low surrogate
      {R"("\ud800\u0041")", 9},   // high surrogate, then no low one
      {R"("\ud800\ud800")", 10},  // high surrogate twice
      {"\"a\x01\"", 2},           // raw control characters
      {"\"a\tb\"", 2},
      {"\"a\nb\"", 2},
      {"\"\xC0\x80\"", 1},          // overlong
      {"\"\xED\xA0\x80\"", 2},      // a surrogate in UTF-8
      {"\"\xF4\x90\x80\x80\"", 2},  // past U+10FFFF
      {"\"\xE2\x82\"", 3},          // a character cut short
      {"\"\x80\"", 1},
      {"\"\xFF\"", 1},
      {"trux", 3},
      {"nulll", 4},
      {"[1 2]", 3},
      {R"({"a" 1})", 5},
      {R"({"a":1 "b":2})", 7},
      {"{,}", 1},
      {"[,1]", 1},
      {"]", 0},
      {"}", 0},
      {R"({"a":1}})", 7},
      {R"({"a":1}x)", 7},
      {"[1,2]]", 5},
  };
  const JsonSchema any = any_value();
  for (const auto& [text, at] : cases) {
    EXPECT_FALSE(nlohmann::json::accept(text)) << "test data: " << text;
    JsonMatcher m(any);
    EXPECT_EQ(first_refused(m, text), at) << text;
  }
}

TEST(JsonMatcherTest, RefusedAcceptLeavesTheStateAsItWas) {
  JsonMatcher m(any_value());
  ASSERT_TRUE(m.accept(R"({"a":[1,)"));
  EXPECT_FALSE(m.accept("2,]"));  // the ']' is refused: "2," must not stay taken
  EXPECT_FALSE(m.can_accept("]"));
  EXPECT_TRUE(m.can_accept("3]}"));
  EXPECT_TRUE(m.accept("2]}"));
  EXPECT_TRUE(m.done());
  EXPECT_FALSE(m.can_accept(" "));
}

TEST(JsonMatcherTest, BoundsWhitespaceNumbersAndDepth) {
  const JsonSchema any = any_value();
  const std::string run(kMaxWhitespace, ' ');
  EXPECT_TRUE(matches(any, run + "[" + run + "1" + run + "," + run + "2" + run + "]"));
  EXPECT_EQ(first_refused(any, run + " {}"), kMaxWhitespace);
  EXPECT_EQ(first_refused(any, "[" + run + " 1]"), kMaxWhitespace + 1);
  EXPECT_EQ(first_refused(any, "{} "), 2);  // nothing after the top-level value
  EXPECT_EQ(first_refused(any, "1 "), 1);

  EXPECT_TRUE(matches(any, std::string("-") + std::string(16, '9')));
  EXPECT_EQ(first_refused(any, std::string(17, '9')), 16);
  EXPECT_TRUE(matches(any, "0." + std::string(16, '9')));
  EXPECT_EQ(first_refused(any, "0." + std::string(17, '9')), 18);
  EXPECT_TRUE(matches(any, "[1e-99,1E+99]"));
  EXPECT_EQ(first_refused(any, "1e999"), 4);

  const std::string deep = std::string(kMaxDepth, '[') + "1" + std::string(kMaxDepth, ']');
  EXPECT_TRUE(nlohmann::json::accept(deep));
  EXPECT_TRUE(matches(any, deep));
  EXPECT_EQ(first_refused(any, std::string(kMaxDepth + 1, '[')), kMaxDepth);
  JsonMatcher m(any);
  ASSERT_TRUE(m.accept(std::string(kMaxDepth, '[')));
  EXPECT_TRUE(m.can_accept("\"deep enough\"") && m.can_accept("{}") == false);
}

// Random byte mutations of valid documents: whatever the matcher takes whole and calls done
// nlohmann parses; and without whitespace or runs of 3+ digits (where the matcher's bounds bite)
// whatever nlohmann parses the matcher takes.
TEST(JsonMatcherTest, RandomMutationsAgreeWithNlohmann) {
  const JsonSchema any = any_value();
  const std::string alphabet = "{}[]\",:\\ 0123456789aeEtrufnl.-+u\x01\xC3\xA9\xE4\xB8\xF0\x9F";
  std::mt19937 rng(1234);
  int done = 0, both = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text = kValidDocs[rng() % kValidDocs.size()];
    for (int k = 1 + rng() % 3; k > 0; --k) {
      const size_t at = rng() % (text.size() + 1);
      const char c = rng() % 8 ? alphabet[rng() % alphabet.size()] : char(rng());
      switch (rng() % 3) {
        case 0:
          text.insert(text.begin() + at, c);
          break;
        case 1:
          if (at < text.size()) text[at] = c;
          break;
        default:
          if (at < text.size()) text.erase(at, 1);
      }
    }
    const bool ours = matches(any, text);
    const bool theirs = nlohmann::json::accept(text);
    if (ours) {
      ++done;
      EXPECT_TRUE(theirs) << "matcher took invalid JSON: " << text;
    }
    // (nlohmann also stops at a NUL byte, taking "1\0x" for 1)
    bool bounded = text.find_first_of(std::string(" \t\r\n\0", 5)) == std::string::npos;
    for (size_t i = 0, run = 0; i < text.size(); ++i) {
      run = isdigit(uint8_t(text[i])) ? run + 1 : 0;
      bounded &= run <= 2;
    }
    if (theirs && bounded) {
      ++both;
      EXPECT_TRUE(ours) << "matcher refused valid JSON: " << text;
    }
  }
  EXPECT_GT(done, 1000);  // the test is not vacuous
  EXPECT_GT(both, 1000);
}

// Documents kOrderSchema allows.
const std::vector<std::string> kSchemaDocs = {
    R"({"id":1,"status":"new","items":[{"sku":"ab","qty":2}],"kind":"order"})",
    R"({"id":-7,"status":"paid","note":null,"price":9.5,"items":[{"sku":"abcd","qty":0,"gift":true},{"sku":"xy","qty":3}],"kind":"order","tags":["b"],"extra":{"n":2}})",
    R"({ "id": 42, "status": "shipped", "note": "h\u00e9llo", "items": [ {"sku": "q1", "qty": 1} ], "kind": "order", "extra": null })",
};

TEST(JsonSchemaTest, SchemaDocumentsAreAcceptedAndValid) {
  const ojson schema = ojson::parse(json_test::kOrderSchema);
  const JsonSchema s = JsonSchema::parse(schema);
  for (const std::string& doc : kSchemaDocs) {
    ASSERT_TRUE(validate(nlohmann::json::parse(doc), schema)) << "test data: " << doc;
    EXPECT_TRUE(matches(s, doc)) << doc << " refused at " << first_refused(s, doc);
  }
}

TEST(JsonSchemaTest, RandomMutationsThatMatchAlsoValidate) {
  const ojson schema = ojson::parse(json_test::kOrderSchema);
  const JsonSchema s = JsonSchema::parse(schema);
  const std::string alphabet = "{}[]\",:\\ 0123456789.-eabcdknpqrstuwxyz";
  std::mt19937 rng(99);
  int accepted = 0;
  for (int iter = 0; iter < 20000; ++iter) {
    std::string text = kSchemaDocs[rng() % kSchemaDocs.size()];
    for (int k = 1 + rng() % 2; k > 0; --k) {
      const size_t at = rng() % text.size();
      const char c = alphabet[rng() % alphabet.size()];
      if (rng() % 2)
        text.insert(text.begin() + at, c);
      else
        text.erase(at, 1);
    }
    if (!matches(s, text)) continue;
    ++accepted;
    ASSERT_TRUE(nlohmann::json::accept(text)) << text;
    EXPECT_TRUE(validate(nlohmann::json::parse(text), schema)) << text;
  }
  EXPECT_GT(accepted, 300);
}

TEST(JsonSchemaTest, RequiredPropertiesInSchemaOrder) {
  const JsonSchema s = JsonSchema::parse_text(R"({"type":"object","properties":{
      "z":{"type":"integer"},"b":{"type":"integer"},"a":{"type":"integer"}},
      "required":["z","a"]})");
  EXPECT_TRUE(matches(s, R"({"z":1,"a":2})"));
  EXPECT_TRUE(matches(s, R"({"z":1,"b":2,"a":3})"));
  EXPECT_EQ(first_refused(s, R"({"a":1,"z":2})"), 2);         // z comes first
  EXPECT_EQ(first_refused(s, R"({"z":1})"), 6);               // a is required
  EXPECT_EQ(first_refused(s, R"({"z":1,"a":2,"b":3})"), 12);  // b was skipped for good
  EXPECT_EQ(first_refused(s, R"({"z":1,"c":2})"), 8);         // not a property
  EXPECT_EQ(first_refused(s, "{}"), 1);
}

TEST(JsonSchemaTest, OptionalPropertiesMayAllBeSkipped) {
  const JsonSchema s = JsonSchema::parse_text(
      R"({"properties":{"name":{"type":"string"},"nick":{"type":"string"}}})");
  EXPECT_TRUE(matches(s, "{}"));
  EXPECT_TRUE(matches(s, R"({"nick":"x"})"));
  EXPECT_TRUE(matches(s, R"({"name":"x","nick":"y"})"));
  EXPECT_EQ(first_refused(s, R"({"nick":"x","name":"y"})"), 11);
  EXPECT_EQ(first_refused(s, R"({"nam":"x"})"), 5);  // a prefix of a key is not a key
}

TEST(JsonSchemaTest, EnumAndConstTakeAnyJsonValue) {
  const JsonSchema s = JsonSchema::parse_text(
      R"({"enum":["red","green","blue",1,12,null,{"x":[1,"é"]},["a"],"a\"b"]})");
  for (const char* doc :
       {R"("red")", R"("green")", "1", "12", "null", R"({"x":[1,"é"]})", R"(["a"])", R"("a\"b")"})
    EXPECT_TRUE(matches(s, doc)) << doc;
  EXPECT_EQ(first_refused(s, R"("gray")"), 3);
  EXPECT_EQ(first_refused(s, "123"), 2);
  EXPECT_EQ(first_refused(s, "2"), 0);
  EXPECT_EQ(first_refused(s, R"({ "x":[1,"é"]})"), 1);  // enum values are compact
  EXPECT_TRUE(matches(JsonSchema::parse_text(R"({"const":{"k":true}})"), R"({"k":true})"));
  // values of other types than "type" are dropped
  const JsonSchema typed = JsonSchema::parse_text(R"({"type":"string","enum":["a",1]})");
  EXPECT_TRUE(matches(typed, R"("a")"));
  EXPECT_EQ(first_refused(typed, "1"), 0);
}

TEST(JsonSchemaTest, NestedArraysOfObjectsAndItemCounts) {
  const JsonSchema s = JsonSchema::parse_text(R"({"type":"array","minItems":1,"maxItems":2,
      "items":{"type":"object","properties":{"id":{"type":"integer"},
        "tags":{"type":"array","items":{"type":"string"},"maxItems":2}},
      "required":["id","tags"]}})");
  EXPECT_TRUE(matches(s, R"([{"id":1,"tags":[]}])"));
  EXPECT_TRUE(matches(s, R"([{"id":1,"tags":["a","b"]},{"id":2,"tags":["c"]}])"));
  EXPECT_EQ(first_refused(s, "[]"), 1);
  EXPECT_EQ(first_refused(s, R"([{"id":1,"tags":[]},{"id":2,"tags":[]},)"), 38);
  EXPECT_EQ(first_refused(s, R"([{"id":1,"tags":["a","b","c"]}])"), 24);
  EXPECT_EQ(first_refused(s, R"([{"id":1}])"), 8);
  const JsonSchema exact = JsonSchema::parse_text(R"({"minItems":2,"maxItems":2})");
  EXPECT_TRUE(matches(exact, "[1,[]]"));
  EXPECT_EQ(first_refused(exact, "[1]"), 2);
  EXPECT_EQ(first_refused(exact, "[1,2,3]"), 4);
  EXPECT_TRUE(matches(JsonSchema::parse_text(R"({"maxItems":0})"), "[]"));
  EXPECT_EQ(first_refused(JsonSchema::parse_text(R"({"maxItems":0})"), "[1]"), 1);
}

TEST(JsonSchemaTest, StringLengthCountsCodePoints) {
  const JsonSchema s = JsonSchema::parse_text(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(matches(s, R"("ab")"));
  EXPECT_TRUE(matches(s, R"("abc")"));
  EXPECT_EQ(first_refused(s, R"("abcd")"), 4);
  EXPECT_EQ(first_refused(s, R"("a")"), 2);
  EXPECT_TRUE(matches(s, "\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80\""));  // 3 code points, 9 bytes
  EXPECT_EQ(first_refused(s, "\"\xC3\xA9\xE4\xB8\xAD\xF0\x9F\x98\x80x\""), 10);
  EXPECT_TRUE(matches(s, R"("\u00e9\n\"")"));      // an escape is one
  EXPECT_TRUE(matches(s, R"("\uD83D\uDE00ab")"));  // a surrogate pair is one
  EXPECT_EQ(first_refused(s, R"("\uD83D\uDE00abc")"), 15);
  const JsonSchema empty = JsonSchema::parse_text(R"({"type":"string","maxLength":0})");
  EXPECT_TRUE(matches(empty, R"("")"));
  EXPECT_EQ(first_refused(empty, R"("a")"), 1);
}

TEST(JsonSchemaTest, IntegerAndNumber) {
  const JsonSchema i = JsonSchema::parse_text(R"({"type":"integer"})");
  const JsonSchema n = JsonSchema::parse_text(R"({"type":"number"})");
  for (const char* doc : {"0", "-3", "12"}) {
    EXPECT_TRUE(matches(i, doc)) << doc;
    EXPECT_TRUE(matches(n, doc)) << doc;
  }
  EXPECT_EQ(first_refused(i, "1.5"), 1);
  EXPECT_EQ(first_refused(i, "1e3"), 1);
  EXPECT_TRUE(matches(n, "1.5"));
  EXPECT_TRUE(matches(n, "-1e3"));
  EXPECT_EQ(first_refused(i, "\"1\""), 0);
  const JsonSchema both = JsonSchema::parse_text(R"({"type":["integer","number"]})");
  EXPECT_TRUE(matches(both, "2.5"));
}

TEST(JsonSchemaTest, TypeListsAndAnyOfPickByTheFirstByte) {
  const JsonSchema s = JsonSchema::parse_text(R"({"type":["string","null"]})");
  EXPECT_TRUE(matches(s, R"("x")"));
  EXPECT_TRUE(matches(s, "null"));
  EXPECT_EQ(first_refused(s, "1"), 0);
  const JsonSchema a = JsonSchema::parse_text(R"({"anyOf":[
      {"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]},
      {"type":"array","items":{"type":"boolean"}}, {"type":"null"}, {"enum":["x","y"]}]})");
  for (const char* doc : {R"({"a":1})", "[true,false]", "null", R"("y")"})
    EXPECT_TRUE(matches(a, doc)) << doc;
  EXPECT_EQ(first_refused(a, R"("z")"), 1);
  EXPECT_EQ(first_refused(a, "[1]"), 1);
}

TEST(JsonSchemaTest, FreeObjectsAndAdditionalProperties) {
  const JsonSchema free = JsonSchema::parse_text(R"({"type":"object"})");
  EXPECT_TRUE(matches(free, R"({"any":["thing",1],"b":{}})"));
  const JsonSchema closed =
      JsonSchema::parse_text(R"({"type":"object","additionalProperties":false})");
  EXPECT_TRUE(matches(closed, "{}"));
  EXPECT_EQ(first_refused(closed, R"({"a":1})"), 1);
  const JsonSchema ints =
      JsonSchema::parse_text(R"({"type":"object","additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(matches(ints, R"({"x":1,"y":2})"));
  EXPECT_EQ(first_refused(ints, R"({"x":"s"})"), 5);
  // with properties, others are never generated, whatever additionalProperties says
  const JsonSchema listed = JsonSchema::parse_text(
      R"({"properties":{"a":{"type":"integer"}},"additionalProperties":true})");
  EXPECT_EQ(first_refused(listed, R"({"a":1,"b":2})"), 6);
}

TEST(JsonSchemaTest, UnsupportedKeywordsAreNamedWithTheirPath) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"type":"object","properties":{"a":{"type":"string","pattern":"^x"}}})",
       "keyword 'pattern' at /properties/a is not supported; supported: type, properties"},
      {R"({"$ref":"#/$defs/x"})", "keyword '$ref' at (root) is not supported"},
      {R"({"type":"string","format":"date"})", "keyword 'format' at (root)"},
      {R"({"oneOf":[{"type":"string"}]})", "keyword 'oneOf' at (root)"},
      {R"({"allOf":[{"type":"string"}]})", "keyword 'allOf'"},
      {R"({"properties":{"a":{"patternProperties":{}}}})",
       "keyword 'patternProperties' at /properties/a"},
      {R"({"items":{"properties":{"n/m":{"type":"number","minimum":0}}}})",
       "keyword 'minimum' at /items/properties/n~1m"},
      {R"({"anyOf":[{"type":"string"},{"not":{}}]})", "keyword 'not' at /anyOf/1"},
      {R"({"items":[{"type":"string"}]})", "'items' as an array (tuple form) at (root)"},
      {R"({"minItems":-1})", "'minItems' at (root) must be a non-negative integer, not -1"},
      {R"({"minItems":3,"maxItems":2})", "'minItems' at (root) 3 is more than 'maxItems' 2"},
      {R"({"minLength":3,"maxLength":2})", "'minLength' at (root) 3 is more than"},
      {R"({"properties":{},"required":["a"]})", "'required' property 'a' at (root) is not in"},
      {R"({"enum":[]})", "'enum' at (root) must be a non-empty array"},
      {R"({"type":"integer","enum":["a"]})", "'enum' at (root) has no value of the schema's"},
      {R"({"type":"int"})", "'type' \"int\" at (root) is not a JSON Schema type"},
      {R"({"type":"string","anyOf":[{}]})", "keyword 'type' next to 'anyOf' at (root)"},
      {R"({"enum":["a"],"maxLength":1})", "keyword 'maxLength' next to 'enum'"},
      {R"({"properties":{"a":false}})", "the schema false at /properties/a allows no value"},
      {R"({"anyOf":[{"type":"object"},{"type":"object","properties":{}}]})",
       "anyOf alternatives at /anyOf/0 and /anyOf/1 can both start with '{'"},
      {R"({"anyOf":[{"type":"integer"},{"type":"number"}]})", "can both start with '-'"},
      {"{\"type\":", "json_schema: not valid JSON"},
      {R"({"maximum":1e999})", "json_schema: not valid JSON"},  // out_of_range (fuzzing found)
  };
  for (const auto& [schema, expected] : cases) {
    const std::string err = error_of(schema);
    EXPECT_NE(err.find(expected), std::string::npos) << schema << "\n  -> " << err;
    EXPECT_EQ(err.rfind("json_schema: ", 0), 0u) << err;
  }
  std::string deep = "{}";
  for (int i = 0; i <= kMaxSchemaDepth; ++i) deep = R"({"items":)" + deep + "}";
  EXPECT_NE(error_of(deep).find("nests deeper than"), std::string::npos) << error_of(deep);
}

TEST(JsonSchemaTest, AnnotationsAreIgnored) {
  const JsonSchema s = JsonSchema::parse_text(R"({"title":"t","description":"d","$id":"x",
      "$comment":"c","$defs":{"unused":{"pattern":"x"}},"examples":[1],"default":1,
      "deprecated":false,"readOnly":true,"writeOnly":false,"type":"integer"})");
  EXPECT_TRUE(matches(s, "5"));
}

TEST(JsonSchemaTest, ResponseFormat) {
  EXPECT_FALSE(JsonSchema::from_response_format(ojson::parse(R"({"type":"text"})")));
  auto obj = JsonSchema::from_response_format(ojson::parse(R"({"type":"json_object"})"));
  ASSERT_TRUE(obj);
  EXPECT_TRUE(matches(*obj, R"({"a":1})"));
  EXPECT_EQ(first_refused(*obj, "[1]"), 0);
  auto js = JsonSchema::from_response_format(ojson::parse(R"({"type":"json_schema",
      "json_schema":{"name":"n","strict":true,"schema":{"type":"object","properties":{
      "b":{"type":"boolean"},"a":{"type":"integer"}},"required":["b","a"],
      "additionalProperties":false}}})"));
  ASSERT_TRUE(js);
  EXPECT_TRUE(matches(*js, R"({"b":true,"a":1})"));  // schema order, not sorted
  EXPECT_EQ(first_refused(*js, R"({"a":1})"), 2);
  for (const char* bad :
       {R"({"type":"json"})", R"({"kind":"text"})", "[]", R"({"type":"json_schema"})"}) {
    try {
      JsonSchema::from_response_format(ojson::parse(bad));
      ADD_FAILURE() << "no error for " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("response_format: ", 0), 0u) << e.what();
    }
  }
}

}  // namespace
}  // namespace krafla
