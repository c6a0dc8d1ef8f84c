// Parsing and validation of /v1/chat/completions and /v1/completions request bodies into one
// CompletionRequest. Everything a client can get wrong is caught here, before the request
// joins the queue, and reported as an ApiError naming the field.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "krafla/chat.h"
#include "krafla/json_constraint.h"
#include "krafla/sampler.h"

namespace krafla::server {

enum class Endpoint { kChat, kCompletion };

struct CompletionRequest {
  Endpoint endpoint = Endpoint::kChat;
  std::string model;                  // "" when the client sent none
  std::vector<ChatMessage> messages;  // chat: the conversation
  std::string prompt_text;            // completion: a text prompt …
  std::vector<int32_t> prompt_ids;    // … or token ids (prompt_is_ids)
  bool prompt_is_ids = false;
  SamplerParams sampler;          // RequestDefaults unless the client set them
  int max_tokens = -1;            // < 0: until a stop token or the context is full
  std::vector<std::string> stop;  // stop strings (non-empty)
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  int n = 1;                         // choices; choice i samples with seed + i
  bool logprobs = false;             // log probabilities of the sampled tokens
  int top_logprobs = 0;              // and of this many most likely tokens at each step (<= 20)
  std::optional<JsonSchema> format;  // response_format json_object / json_schema
  std::string tools_json;            // the tools array as the client wrote it; "" without tools
  // tool_choice "required", or the name of the function it names: the reply must be a call.
  bool tool_required = false;
  std::string tool_forced;  // "": any of the tools
};

// OpenAI's sampling defaults: temperature 1, top_p 1, and the extensions off (top_k 0, min_p 0,
// repeat_penalty 1).
SamplerParams openai_sampler_defaults();

// What a request gets for the sampling fields it leaves out: ml_server's --temp, --top-k, …
// (OpenAI's defaults without them). A request without a seed takes `seed` when the server was
// started with --seed, else a fresh random one.
struct RequestDefaults {
  SamplerParams sampler = openai_sampler_defaults();
  std::optional<uint64_t> seed;
};

// Throws ApiError (400) for malformed JSON, wrong types, out-of-range values, options this
// server does not implement (frequency/presence penalties, logit_bias, …) and fields it does
// not know (request_fields.h has the rule).
CompletionRequest parse_request(const std::string& body, Endpoint endpoint,
                                const RequestDefaults& defaults = {});

}  // namespace krafla::server
