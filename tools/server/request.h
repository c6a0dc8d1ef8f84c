// Parsing and validation of /v1/chat/completions and /v1/completions request bodies into one
// CompletionRequest. Everything a client can get wrong is caught here, before the request
// joins the queue, and reported as an ApiError naming the field.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "krafla/chat.h"
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
  SamplerParams sampler;          // OpenAI defaults unless the client set them
  int max_tokens = -1;            // < 0: until a stop token or the context is full
  std::vector<std::string> stop;  // stop strings (non-empty)
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
};

// Throws ApiError (400) for malformed JSON, wrong types, out-of-range values and options this
// server does not implement (n > 1, tools, logprobs, frequency/presence penalties, …).
CompletionRequest parse_request(const std::string& body, Endpoint endpoint);

}  // namespace krafla::server
