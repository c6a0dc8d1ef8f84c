// The OpenAI response shapes: chat.completion(.chunk), text_completion, model list, usage and
// error objects, and the server-sent-event framing of a stream. Field names and nesting follow
// the OpenAI API reference so the official SDKs parse them unmodified.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "krafla/chat.h"
#include "krafla/tokenizer.h"
#include "server/api_error.h"
#include "server/request.h"

namespace krafla::server {

using Json = nlohmann::ordered_json;  // keeps id/object/created first, as OpenAI prints them

// One sampled token's log probability under the model (log-softmax of its logits), and the
// most likely alternatives when the request asked for top_logprobs.
struct TopLogprob {
  int32_t id;
  float logprob;
};
struct TokenLogprob {
  int32_t id;
  float logprob;
  std::vector<TopLogprob> top;  // most likely first
};

struct Usage {
  int prompt_tokens = 0;
  int cached_tokens = 0;  // prompt tokens whose KV entries were reused from the last request
  int completion_tokens = 0;
};

// What every response and chunk of one request repeats.
struct ResponseMeta {
  Endpoint endpoint = Endpoint::kChat;
  std::string id;  // chatcmpl-… or cmpl-…
  std::string model;
  int64_t created = 0;
  std::string fingerprint;
};

ResponseMeta new_meta(Endpoint endpoint, const std::string& model);
std::string new_tool_call_id();  // call_…

Json usage_json(const Usage& u);
Json error_json(const ApiError& e);

// One choice of a reply: its text, how it ended, its log probabilities (chat_logprobs_json /
// text_logprobs_json, or null) and the tool calls parsed from it (chat only).
struct Choice {
  int index = 0;
  std::string text;
  std::string finish;  // "" in a stream chunk that does not end the choice
  Json logprobs;       // null unless requested
  std::vector<ToolCall> tool_calls;
};

// A whole (non-streamed) response.
Json completion_json(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u);

// One stream chunk of one choice. For chat, `role` puts {"role": "assistant"} in the delta (the
// first chunk); tool calls go in the delta as OpenAI streams them (whole, one entry each). With
// include_usage every chunk carries "usage": null, as OpenAI's.
Json chunk_json(const ResponseMeta& m, const Choice& c, bool role, bool include_usage);

// The log probabilities of sampled tokens in OpenAI's shapes: chat's {"content": [{token,
// logprob, bytes, top_logprobs}], "refusal": null}; completions' {tokens, token_logprobs,
// top_logprobs, text_offset}, offsets counted from `offset` (bytes of the reply before), which
// is advanced past these tokens.
Json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& lps);
Json text_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& lps, size_t& offset);
// The last chunk when stream_options.include_usage: no choices, the usage.
Json usage_chunk_json(const ResponseMeta& m, const Usage& u);

Json model_json(const std::string& id, int64_t created);
Json models_json(const std::string& id, int64_t created);
// GET /: {"name": "ml_server", "version", "model", "endpoints": […]}.
Json server_info_json(const std::string& model_id);

// "data: {json}\n\n" and the terminating "data: [DONE]\n\n".
std::string sse_event(const Json& j);
inline constexpr const char* kSseDone = "data: [DONE]\n\n";

// Serializes without throwing on invalid UTF-8 (replaced by U+FFFD).
std::string dump(const Json& j);

}  // namespace krafla::server
