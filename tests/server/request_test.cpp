// Request parsing: OpenAI's defaults, the accepted forms of each field, and an ApiError naming
// the field for everything else.
#include "server/request.h"

#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>

#include "server/api_error.h"
#include "server/openai.h"
#include "server/request_fields.h"

namespace krafla::server {
namespace {

const char* kChat = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])";

std::string chat_with(const std::string& extra) { return std::string(kChat) + ", " + extra + "}"; }

std::string text_with(const std::string& extra) { return R"({"prompt": "x", )" + extra + "}"; }

ApiError error_of(const std::string& body, Endpoint ep = Endpoint::kChat) {
  try {
    parse_request(body, ep);
  } catch (const ApiError& e) {
    return e;
  }
  ADD_FAILURE() << "no error for " << body;
  return ApiError(0, "", "");
}

TEST(Request, ChatDefaults) {
  const CompletionRequest r = parse_request(std::string(kChat) + "}", Endpoint::kChat);
  EXPECT_EQ(r.model, "m");
  ASSERT_EQ(r.messages.size(), 1u);
  EXPECT_EQ(r.messages[0].role, "user");
  EXPECT_EQ(r.messages[0].content, "hi");
  EXPECT_EQ(r.max_tokens, -1);
  EXPECT_FLOAT_EQ(r.sampler.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.sampler.top_p, 1.0f);
  EXPECT_EQ(r.sampler.top_k, 0);
  EXPECT_FLOAT_EQ(r.sampler.repeat_penalty, 1.0f);
  EXPECT_FALSE(r.stream);
  EXPECT_TRUE(r.stop.empty());
}

TEST(Request, ChatFields) {
  const CompletionRequest r = parse_request(
      chat_with(R"("temperature": 0, "seed": 7, "max_tokens": 5, "max_completion_tokens": 9,
                   "stop": ["a", "", "bc"], "stream": true, "stream_options": {"include_usage": true},
                   "top_k": 40, "frequency_penalty": 0, "user": "x", "n": 1, "logprobs": false)"),
      Endpoint::kChat);
  EXPECT_FLOAT_EQ(r.sampler.temperature, 0.0f);
  EXPECT_EQ(r.sampler.seed, 7u);
  EXPECT_EQ(r.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_EQ(r.stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.sampler.top_k, 40);
}

TEST(Request, ContentPartsAndDeveloperRole) {
  const CompletionRequest r = parse_request(
      R"({"messages": [{"role": "developer", "content": [{"type": "text", "text": "a"},
                                                        {"type": "text", "text": "b"}]},
                       {"role": "assistant", "content": null}]})",
      Endpoint::kChat);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "ab");
  EXPECT_EQ(r.messages[1].content, "");
}

TEST(Request, CompletionPromptForms) {
  auto parse = [](const std::string& p) {
    return parse_request(R"({"prompt": )" + p + "}", Endpoint::kCompletion);
  };
  EXPECT_EQ(parse(R"("abc")").prompt_text, "abc");
  EXPECT_EQ(parse(R"("abc")").max_tokens, 16);  // OpenAI's legacy default
  EXPECT_EQ(parse(R"(["abc"])").prompt_text, "abc");
  const CompletionRequest ids = parse("[1, 2, 3]");
  EXPECT_TRUE(ids.prompt_is_ids);
  EXPECT_EQ(ids.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(parse("[[4, 5]]").prompt_ids, (std::vector<int32_t>{4, 5}));
}

TEST(Request, ErrorsNameTheField) {
  struct Case {
    std::string body, param, code;
  };
  const std::vector<Case> cases = {
      {"{", "", "invalid_json"},
      {"[]", "", "invalid_json"},
      {chat_with(R"("temperature": 1e999)"), "", "invalid_json"},  // a number out of range
      {R"({"model": "m"})", "messages", "missing_required_parameter"},
      {chat_with(R"("temperature": "hot")"), "temperature", "invalid_type"},
      {chat_with(R"("temperature": 2.5)"), "temperature", "invalid_value"},
      {chat_with(R"("max_tokens": -1)"), "max_tokens", "invalid_value"},
      {chat_with(R"("max_tokens": 1.5)"), "max_tokens", "invalid_type"},
      {chat_with(R"("stop": [1])"), "stop", "invalid_type"},
      {chat_with(R"("stream": 1)"), "stream", "invalid_type"},
      {chat_with(R"("n": 17)"), "n", "invalid_value"},
      {chat_with(R"("presence_penalty": 1)"), "presence_penalty", "unsupported_parameter"},
      {chat_with(R"("tools": [{"type": "function"}])"), "tools[0].function", "invalid_value"},
      {chat_with(R"("tools": {"type": "function"})"), "tools", "invalid_type"},
      {chat_with(R"("top_logprobs": 3)"), "top_logprobs", "invalid_value"},
      {chat_with(R"("logprobs": true, "top_logprobs": 21)"), "top_logprobs", "invalid_value"},
      {chat_with(R"("response_format": {"type": "json_schema", "json_schema": {"name": "x",
         "schema": {"type": "string", "pattern": "a+"}}})"),
       "response_format", "invalid_value"},
      {chat_with(R"("response_format": {"type": "xml"})"), "response_format", "invalid_value"},
      {chat_with(R"("tool_choice": "required")"), "tool_choice", "invalid_value"},
      {chat_with(R"("tool_choice": {"type": "function", "function": {"name": "g"}},
                    "tools": [{"type": "function", "function": {"name": "f"}}])"),
       "tool_choice", "invalid_value"},
      {chat_with(R"("model": 3)"), "model", "invalid_type"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].tool_call_id",
       "missing_required_parameter"},
      {R"({"messages": [{"role": "function", "content": "x"}]})", "messages[0].role",
       "unsupported_parameter"},
      {R"({"messages": [{"role": "user", "content": "x", "tool_calls": []}]})",
       "messages[0].tool_calls", "unsupported_parameter"},
      {R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})",
       "messages[0].content", "unsupported_parameter"},
  };
  for (const auto& c : cases) {
    const ApiError e = error_of(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body;
    EXPECT_EQ(e.code, c.code) << c.body;
  }
  EXPECT_EQ(error_of(R"({"prompt": ["a", "b"]})", Endpoint::kCompletion).param, "prompt");
  EXPECT_EQ(error_of(R"({"prompt": [-1]})", Endpoint::kCompletion).code, "invalid_value");
  EXPECT_EQ(error_of(R"({"prompt": "a", "echo": true})", Endpoint::kCompletion).param, "echo");
  EXPECT_EQ(error_of(R"({"prompt": "a", "logprobs": 6})", Endpoint::kCompletion).code,
            "invalid_value");
}

// n, logprobs, response_format and tools as the server reads them.
TEST(Request, ChoicesLogprobsFormatAndTools) {
  const CompletionRequest r =
      parse_request(chat_with(R"("n": 3, "logprobs": true, "top_logprobs": 5,
                   "response_format": {"type": "json_schema", "json_schema": {"name": "p",
                     "schema": {"type": "object", "properties": {"z": {"type": "integer"},
                       "a": {"type": "boolean"}}, "required": ["z", "a"]}}},
                   "tools": [{"type": "function", "function": {"name": "f", "parameters":
                     {"type": "object", "properties": {"y": {}, "b": {}}}}}])"),
                    Endpoint::kChat);
  EXPECT_EQ(r.n, 3);
  EXPECT_TRUE(r.logprobs);
  EXPECT_EQ(r.top_logprobs, 5);
  ASSERT_TRUE(r.format.has_value());
  JsonMatcher m(*r.format);
  EXPECT_TRUE(m.accept(R"({"z":1,"a":true})"));  // the schema's property order, not sorted
  EXPECT_TRUE(m.done());
  EXPECT_NE(r.tools_json.find(R"("y":{},"b":{})"), std::string::npos) << r.tools_json;
  // tool_choice "none": the tools are not shown to the model.
  EXPECT_EQ(parse_request(chat_with(R"("tools": [{"type": "function", "function": {"name": "f"}}],
                                     "tool_choice": "none")"),
                          Endpoint::kChat)
                .tools_json,
            "");
  const CompletionRequest t = parse_request(text_with(R"("logprobs": 2)"), Endpoint::kCompletion);
  EXPECT_TRUE(t.logprobs);
  EXPECT_EQ(t.top_logprobs, 2);
  const CompletionRequest turn = parse_request(
      R"({"messages": [{"role": "user", "content": "hi"},
          {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
            "function": {"name": "f", "arguments": "{\"y\": 1}"}}]},
          {"role": "tool", "tool_call_id": "c1", "content": "42"}]})",
      Endpoint::kChat);
  ASSERT_EQ(turn.messages.size(), 3u);
  ASSERT_EQ(turn.messages[1].tool_calls.size(), 1u);
  EXPECT_EQ(turn.messages[1].tool_calls[0].name, "f");
  EXPECT_EQ(turn.messages[1].tool_calls[0].arguments, R"({"y": 1})");
  EXPECT_EQ(turn.messages[2].tool_call_id, "c1");
}

TEST(Request, MinP) {
  EXPECT_FLOAT_EQ(parse_request(chat_with(R"("min_p": 0.05)"), Endpoint::kChat).sampler.min_p,
                  0.05f);
  EXPECT_FLOAT_EQ(parse_request(std::string(kChat) + "}", Endpoint::kChat).sampler.min_p, 0.0f);
  EXPECT_EQ(error_of(chat_with(R"("min_p": "abc")")).code, "invalid_type");
  EXPECT_EQ(error_of(chat_with(R"("min_p": 1.5)")).code, "invalid_value");
  EXPECT_EQ(error_of(chat_with(R"("min_p": -0.1)")).param, "min_p");
}

// The field rule: unknown fields and options that would change the reply are refused by name;
// metadata is type-checked and ignored; null is "not set" for every field.
TEST(RequestFields, UnknownAndUnimplementedAreRefusedByName) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {R"("mirostat": 2)", "mirostat"},
      {R"("mirostat_tau": 5.0)", "mirostat_tau"},
      {R"("grammar": "root ::= \"a\"")", "grammar"},
      {R"("temprature": 0)", "temprature"},
      {R"("typical_p": 0.9)", "typical_p"},
      {R"("logit_bias": {"42": 5})", "logit_bias"},
      {R"("functions": [{"name": "f"}])", "functions"},
      {R"("function_call": {"name": "f"})", "function_call"},
      {R"("audio": {"voice": "alloy"})", "audio"},
      {R"("modalities": ["text", "audio"])", "modalities"},
      {R"("reasoning_effort": "low")", "reasoning_effort"},
      {R"("verbosity": "low")", "verbosity"},
      {R"("web_search_options": {})", "web_search_options"},
      {R"("best_of": 1)", "best_of"},  // a completions field sent to chat
      {R"("prompt": "x")", "prompt"},  // likewise
      {R"("stream_options": {"include_usage": true, "chunk_size": 3})",
       "stream_options.chunk_size"},
  };
  for (const auto& [extra, param] : refused) {
    const ApiError e = error_of(chat_with(extra));
    EXPECT_EQ(e.status, 400) << extra;
    EXPECT_EQ(e.param, param) << extra;
    EXPECT_EQ(e.code, "unsupported_parameter") << extra;
    EXPECT_NE(std::string(e.what()).find(param), std::string::npos) << e.what();
  }
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("messages": [])", "messages"},
           {R"("tools": [{"type": "function"}])", "tools"},
           {R"("echo": true)", "echo"},
           {R"("suffix": "end")", "suffix"},
           {R"("mirostat": 2)", "mirostat"}}) {
    const ApiError e = error_of(text_with(extra), Endpoint::kCompletion);
    EXPECT_EQ(e.param, param) << extra;
    EXPECT_EQ(e.code, "unsupported_parameter") << extra;
  }
}

TEST(RequestFields, NoOpValuesMetadataAndNullsAreAccepted) {
  const CompletionRequest r = parse_request(
      chat_with(R"("n": 1, "logprobs": false, "top_logprobs": 0, "tools": [], "functions": [],
                   "tool_choice": "none", "function_call": "auto", "parallel_tool_calls": true,
                   "logit_bias": {}, "response_format": {"type": "text"}, "modalities": ["text"],
                   "frequency_penalty": 0, "presence_penalty": 0.0, "user": "u-1",
                   "metadata": {"k": "v"}, "store": false, "service_tier": "auto",
                   "safety_identifier": "s", "prompt_cache_key": "c",
                   "prompt_cache_retention": "24h", "prediction": {"type": "content"},
                   "stream_options": {"include_usage": false, "include_obfuscation": true},
                   "mirostat": null, "grammar": null, "audio": null, "reasoning_effort": null)"),
      Endpoint::kChat);
  EXPECT_EQ(r.messages.size(), 1u);
  const CompletionRequest t = parse_request(
      text_with(R"("best_of": 1, "echo": false, "suffix": "", "logprobs": null, "user": "u")"),
      Endpoint::kCompletion);
  EXPECT_EQ(t.prompt_text, "x");
}

TEST(RequestFields, IgnoredFieldsAreTypeChecked) {
  for (const auto& [extra, param] : std::vector<std::pair<std::string, std::string>>{
           {R"("user": 5)", "user"},
           {R"("metadata": "x")", "metadata"},
           {R"("store": "yes")", "store"},
           {R"("service_tier": 1)", "service_tier"},
           {R"("n": "one")", "n"},
           {R"("stream_options": {"include_obfuscation": 1})",
            "stream_options.include_obfuscation"}}) {
    const ApiError e = error_of(chat_with(extra));
    EXPECT_EQ(e.param, param) << extra;
    EXPECT_EQ(e.code, "invalid_type") << extra;
  }
  EXPECT_EQ(error_of(chat_with(R"("frequency_penalty": 3)")).code, "invalid_value");
}

TEST(RequestFields, MessageFields) {
  auto chat = [](const std::string& message) {
    return R"({"messages": [{"role": "user", "content": "hi"}, )" + message + "]}";
  };
  // A reply as the API returns it can be sent back as it is.
  const CompletionRequest r = parse_request(
      chat(R"({"role": "assistant", "content": "a", "refusal": null, "annotations": [],
               "audio": null, "tool_calls": []})"),
      Endpoint::kChat);
  EXPECT_EQ(r.messages.at(1).content, "a");
  for (const auto& [message, param] : std::vector<std::pair<std::string, std::string>>{
           {R"({"role": "user", "content": "b", "name": "Ann"})", "messages[1].name"},
           {R"({"role": "user", "content": "b", "mood": "calm"})", "messages[1].mood"}}) {
    const ApiError e = error_of(chat(message));
    EXPECT_EQ(e.param, param) << message;
    EXPECT_EQ(e.code, "unsupported_parameter") << message;
  }
  EXPECT_EQ(error_of(chat(R"({"role": "assistant", "content": "b", "refusal": 3})")).code,
            "invalid_type");
  const ApiError e =
      error_of(chat(R"({"role": "assistant", "content": "b", "tool_calls": [{"id": "1"}]})"));
  EXPECT_EQ(e.param, "messages[1].tool_calls[0].function");
  EXPECT_EQ(e.code, "invalid_type");
}

TEST(RequestDefaultsTest, ServerDefaultsFillWhatTheRequestLeavesOut) {
  RequestDefaults d;
  d.sampler.temperature = 0.3f;
  d.sampler.top_k = 5;
  d.sampler.top_p = 0.9f;
  d.sampler.min_p = 0.1f;
  d.sampler.repeat_penalty = 1.2f;
  d.sampler.repeat_last_n = -1;
  d.seed = 42;
  const SamplerParams p = parse_request(std::string(kChat) + "}", Endpoint::kChat, d).sampler;
  EXPECT_FLOAT_EQ(p.temperature, 0.3f);
  EXPECT_EQ(p.top_k, 5);
  EXPECT_FLOAT_EQ(p.top_p, 0.9f);
  EXPECT_FLOAT_EQ(p.min_p, 0.1f);
  EXPECT_FLOAT_EQ(p.repeat_penalty, 1.2f);
  EXPECT_EQ(p.repeat_last_n, -1);
  EXPECT_EQ(p.seed, 42u);
  const SamplerParams q =
      parse_request(chat_with(R"("temperature": 1.5, "top_k": 0, "min_p": 0, "seed": 7)"),
                    Endpoint::kChat, d)
          .sampler;
  EXPECT_FLOAT_EQ(q.temperature, 1.5f);
  EXPECT_EQ(q.top_k, 0);
  EXPECT_FLOAT_EQ(q.min_p, 0.0f);
  EXPECT_EQ(q.seed, 7u);  // the request's seed wins over --seed
}

TEST(RequestDefaultsTest, WithoutASeedEachRequestDrawsOne) {
  const std::string body = std::string(kChat) + "}";
  std::set<uint64_t> seeds;
  for (int i = 0; i < 4; ++i) seeds.insert(parse_request(body, Endpoint::kChat).sampler.seed);
  EXPECT_EQ(seeds.size(), 4u);
}

// docs/server.md's field table is the user's copy of kRules: each field, with its rule.
TEST(RequestFields, DocumentedInServerMd) {
  std::ifstream in(KRAFLA_SOURCE_DIR "/docs/server.md");
  ASSERT_TRUE(in) << "docs/server.md";
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  std::set<std::string_view> names;
  for (const FieldRule& r : field_rules()) {
    EXPECT_TRUE(names.insert(r.name).second) << "twice in the table: " << r.name;
    EXPECT_EQ(r.use == FieldUse::kImplemented, r.check == nullptr) << r.name;
    const std::string row = "| `" + std::string(r.name) + "` |";
    const size_t at = text.find(row);
    ASSERT_NE(at, std::string::npos) << r.name << " is missing from docs/server.md";
    const std::string line = text.substr(at, text.find('\n', at) - at);
    const char* kind = r.use == FieldUse::kImplemented ? "| implemented |"
                       : r.use == FieldUse::kIgnored   ? "| ignored |"
                                                       : "| no-op only |";
    EXPECT_NE(line.find(kind), std::string::npos) << line << " should say " << kind;
  }
}

TEST(OpenAiShapes, ChunksAndErrors) {
  ResponseMeta m = new_meta(Endpoint::kChat, "tiny");
  EXPECT_EQ(m.id.rfind("chatcmpl-", 0), 0u);
  Json first = chunk_json(m, Choice{}, true, true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first["usage"].is_null());
  Choice stop;
  stop.finish = "stop";
  Json last = chunk_json(m, stop, false, false);
  EXPECT_TRUE(last["choices"][0]["delta"].empty());
  EXPECT_FALSE(last.contains("usage"));
  Json usage = usage_chunk_json(m, {10, 4, 3});
  EXPECT_TRUE(usage["choices"].empty());
  EXPECT_EQ(usage["usage"]["total_tokens"], 13);
  EXPECT_EQ(usage["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  Json err = error_json(ApiError::invalid("bad", "", "x"));
  EXPECT_TRUE(err["error"]["param"].is_null());
  EXPECT_EQ(err["error"]["code"], "x");
  EXPECT_EQ(sse_event(Json{{"a", 1}}), "data: {\"a\":1}\n\n");
}

TEST(OpenAiShapes, ModelAndServerInfo) {
  const Json m = model_json("tiny", 5);
  EXPECT_EQ(m["id"], "tiny");
  EXPECT_EQ(m["object"], "model");
  EXPECT_EQ(models_json("tiny", 5)["data"][0], m);
  const Json info = server_info_json("tiny");
  EXPECT_EQ(info["model"], "tiny");
  EXPECT_EQ(info["version"], KRAFLA_VERSION);
  EXPECT_FALSE(info["endpoints"].empty());
}

// system_fingerprint carries CMake's project version and the ISA (the test is told both by
// CMake directly, not through the library's KRAFLA_VERSION).
TEST(OpenAiShapes, FingerprintIsVersionAndIsa) {
  const ResponseMeta m = new_meta(Endpoint::kChat, "tiny");
  EXPECT_EQ(m.fingerprint, KRAFLA_EXPECTED_FINGERPRINT);
  EXPECT_EQ(chunk_json(m, Choice{}, true, true)["system_fingerprint"], KRAFLA_EXPECTED_FINGERPRINT);
}

}  // namespace
}  // namespace krafla::server
