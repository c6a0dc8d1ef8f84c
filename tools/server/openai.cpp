#include "server/openai.h"

#include <fmt/format.h>

#include <ctime>
#include <random>

namespace krafla::server {
namespace {

std::string random_suffix() {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::string s(24, ' ');
  for (char& c : s) c = kAlphabet[rng() % (sizeof(kAlphabet) - 1)];
  return s;
}

Json nullable(const std::string& s) { return s.empty() ? Json(nullptr) : Json(s); }

Json head(const ResponseMeta& m, const char* object) {
  return Json{{"id", m.id},
              {"object", object},
              {"created", m.created},
              {"model", m.model},
              {"system_fingerprint", m.fingerprint}};
}

}  // namespace

ResponseMeta new_meta(Endpoint endpoint, const std::string& model) {
  ResponseMeta m;
  m.endpoint = endpoint;
  m.id = (endpoint == Endpoint::kChat ? "chatcmpl-" : "cmpl-") + random_suffix();
  m.model = model;
  m.created = int64_t(std::time(nullptr));
  m.fingerprint = fmt::format("krafla-{}-{}", KRAFLA_VERSION, KRAFLA_ISA_NAME);
  return m;
}

Json usage_json(const Usage& u) {
  return Json{{"prompt_tokens", u.prompt_tokens},
              {"completion_tokens", u.completion_tokens},
              {"total_tokens", u.prompt_tokens + u.completion_tokens},
              {"prompt_tokens_details", {{"cached_tokens", u.cached_tokens}}},
              {"completion_tokens_details", {{"reasoning_tokens", 0}}}};
}

Json error_json(const ApiError& e) {
  return Json{{"error",
               {{"message", e.what()},
                {"type", e.type},
                {"param", nullable(e.param)},
                {"code", nullable(e.code)}}}};
}

Json completion_json(const ResponseMeta& m, const std::string& text, const std::string& finish,
                     const Usage& u) {
  const bool chat = m.endpoint == Endpoint::kChat;
  Json j = head(m, chat ? "chat.completion" : "text_completion");
  Json choice{{"index", 0}};
  if (chat)
    choice["message"] = {{"role", "assistant"}, {"content", text}, {"refusal", nullptr}};
  else
    choice["text"] = text;
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = finish;
  j["choices"] = Json::array({choice});
  j["usage"] = usage_json(u);
  return j;
}

Json chunk_json(const ResponseMeta& m, const std::string& text, bool role,
                const std::string& finish, bool include_usage) {
  const bool chat = m.endpoint == Endpoint::kChat;
  Json j = head(m, chat ? "chat.completion.chunk" : "text_completion");
  Json choice{{"index", 0}};
  if (chat) {
    Json delta = Json::object();
    if (role) delta["role"] = "assistant";
    if (!text.empty() || role) delta["content"] = text;
    choice["delta"] = delta;
  } else {
    choice["text"] = text;
  }
  choice["logprobs"] = nullptr;
  choice["finish_reason"] = nullable(finish);
  j["choices"] = Json::array({choice});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

Json usage_chunk_json(const ResponseMeta& m, const Usage& u) {
  Json j = head(m, m.endpoint == Endpoint::kChat ? "chat.completion.chunk" : "text_completion");
  j["choices"] = Json::array();
  j["usage"] = usage_json(u);
  return j;
}

Json model_json(const std::string& id, int64_t created) {
  return Json{{"id", id}, {"object", "model"}, {"created", created}, {"owned_by", "krafla"}};
}

Json models_json(const std::string& id, int64_t created) {
  return Json{{"object", "list"}, {"data", Json::array({model_json(id, created)})}};
}

Json server_info_json(const std::string& model_id) {
  return Json{{"name", "ml_server"},
              {"description", "Krafla's OpenAI-compatible HTTP server"},
              {"version", KRAFLA_VERSION},
              {"model", model_id},
              {"endpoints",
               {"POST /v1/chat/completions", "POST /v1/completions", "GET /v1/models",
                "GET /v1/models/{model}", "GET /health", "GET /metrics"}}};
}

std::string dump(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string sse_event(const Json& j) { return "data: " + dump(j) + "\n\n"; }

}  // namespace krafla::server
