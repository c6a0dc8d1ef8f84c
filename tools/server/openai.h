// The OpenAI response shapes: chat.completion(.chunk), text_completion, model list, usage and
// error objects, and the server-sent-event framing of a stream. Field names and nesting follow
// the OpenAI API reference so the official SDKs parse them unmodified.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "server/api_error.h"
#include "server/request.h"

namespace krafla::server {

using Json = nlohmann::ordered_json;  // keeps id/object/created first, as OpenAI prints them

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

Json usage_json(const Usage& u);
Json error_json(const ApiError& e);

// A whole (non-streamed) response.
Json completion_json(const ResponseMeta& m, const std::string& text, const std::string& finish,
                     const Usage& u);

// One stream chunk. For chat, `role` puts {"role": "assistant"} in the delta (the first chunk);
// an empty finish means null. With include_usage every chunk carries "usage": null, as OpenAI's.
Json chunk_json(const ResponseMeta& m, const std::string& text, bool role,
                const std::string& finish, bool include_usage);
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
