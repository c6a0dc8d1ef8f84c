// Request parsing: OpenAI's defaults, the accepted forms of each field, and an ApiError naming
// the field for everything else.
#include "server/request.h"

#include <gtest/gtest.h>

#include "server/api_error.h"
#include "server/openai.h"

namespace krafla::server {
namespace {

const char* kChat = R"({"model": "m", "messages": [{"role": "user", "content": "hi"}])";

std::string chat_with(const std::string& extra) { return std::string(kChat) + ", " + extra + "}"; }

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
      {R"({"model": "m"})", "messages", "missing_required_parameter"},
      {chat_with(R"("temperature": "hot")"), "temperature", "invalid_type"},
      {chat_with(R"("temperature": 2.5)"), "temperature", "invalid_value"},
      {chat_with(R"("max_tokens": -1)"), "max_tokens", "invalid_value"},
      {chat_with(R"("max_tokens": 1.5)"), "max_tokens", "invalid_type"},
      {chat_with(R"("stop": [1])"), "stop", "invalid_type"},
      {chat_with(R"("stream": 1)"), "stream", "invalid_type"},
      {chat_with(R"("n": 3)"), "n", "unsupported_parameter"},
      {chat_with(R"("presence_penalty": 1)"), "presence_penalty", "unsupported_parameter"},
      {chat_with(R"("tools": [{"type": "function"}])"), "tools", "unsupported_parameter"},
      {chat_with(R"("logprobs": true)"), "logprobs", "unsupported_parameter"},
      {chat_with(R"("model": 3)"), "model", "invalid_type"},
      {R"({"messages": [{"role": "tool", "content": "x"}]})", "messages[0].role",
       "unsupported_parameter"},
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
}

TEST(OpenAiShapes, ChunksAndErrors) {
  ResponseMeta m = new_meta(Endpoint::kChat, "tiny");
  EXPECT_EQ(m.id.rfind("chatcmpl-", 0), 0u);
  Json first = chunk_json(m, "", true, "", true);
  EXPECT_EQ(first["object"], "chat.completion.chunk");
  EXPECT_EQ(first["choices"][0]["delta"]["role"], "assistant");
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_TRUE(first["usage"].is_null());
  Json last = chunk_json(m, "", false, "stop", false);
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

}  // namespace
}  // namespace krafla::server
