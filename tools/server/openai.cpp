#include "server/openai.h"

#include <fmt/format.h>

#include <ctime>
#include <random>

#include "krafla/system.h"

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
  m.fingerprint = fmt::format("krafla-{}-{}", KRAFLA_VERSION, isa_name());
  return m;
}

std::string new_tool_call_id() { return "call_" + random_suffix(); }

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

namespace {
Json tool_calls_json(const std::vector<ToolCall>& calls, bool stream) {
  Json out = Json::array();
  for (size_t i = 0; i < calls.size(); ++i) {
    Json c;
    if (stream) c["index"] = i;
    c["id"] = calls[i].id;
    c["type"] = "function";
    c["function"] = {{"name", calls[i].name}, {"arguments", calls[i].arguments}};
    out.push_back(std::move(c));
  }
  return out;
}

// A token's text as OpenAI shows it: its bytes, with a piece that is part of a UTF-8 character
// shown as U+FFFD (the bytes field has them exactly).
Json token_fields(const Tokenizer& tok, int32_t id, float logprob) {
  const std::string piece = tok.piece(id);
  Json bytes = Json::array();
  for (unsigned char c : piece) bytes.push_back(int(c));
  return Json{{"token", piece}, {"logprob", logprob}, {"bytes", bytes}};
}
}  // namespace

Json completion_json(const ResponseMeta& m, const std::vector<Choice>& choices, const Usage& u) {
  const bool chat = m.endpoint == Endpoint::kChat;
  Json j = head(m, chat ? "chat.completion" : "text_completion");
  j["choices"] = Json::array();
  for (const Choice& c : choices) {
    Json choice{{"index", c.index}};
    if (chat) {
      const bool calls = !c.tool_calls.empty();
      choice["message"] = {{"role", "assistant"},
                           {"content", calls && c.text.empty() ? Json() : Json(c.text)},
                           {"refusal", nullptr}};
      if (calls) choice["message"]["tool_calls"] = tool_calls_json(c.tool_calls, false);
    } else {
      choice["text"] = c.text;
    }
    choice["logprobs"] = c.logprobs;
    choice["finish_reason"] = c.finish;
    j["choices"].push_back(std::move(choice));
  }
  j["usage"] = usage_json(u);
  return j;
}

Json chunk_json(const ResponseMeta& m, const Choice& c, bool role, bool include_usage) {
  const bool chat = m.endpoint == Endpoint::kChat;
  Json j = head(m, chat ? "chat.completion.chunk" : "text_completion");
  Json choice{{"index", c.index}};
  if (chat) {
    Json delta = Json::object();
    if (role) delta["role"] = "assistant";
    if (!c.text.empty() || role) delta["content"] = c.text;
    if (!c.tool_calls.empty()) delta["tool_calls"] = tool_calls_json(c.tool_calls, true);
    choice["delta"] = delta;
  } else {
    choice["text"] = c.text;
  }
  choice["logprobs"] = c.logprobs;
  choice["finish_reason"] = nullable(c.finish);
  j["choices"] = Json::array({choice});
  if (include_usage) j["usage"] = nullptr;
  return j;
}

Json chat_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& lps) {
  Json content = Json::array();
  for (const TokenLogprob& t : lps) {
    Json e = token_fields(tok, t.id, t.logprob);
    e["top_logprobs"] = Json::array();
    for (const TopLogprob& a : t.top)
      e["top_logprobs"].push_back(token_fields(tok, a.id, a.logprob));
    content.push_back(std::move(e));
  }
  return Json{{"content", content}, {"refusal", nullptr}};
}

Json text_logprobs_json(const Tokenizer& tok, const std::vector<TokenLogprob>& lps,
                        size_t& offset) {
  Json tokens = Json::array(), values = Json::array(), tops = Json::array(),
       offsets = Json::array();
  for (const TokenLogprob& t : lps) {
    const std::string piece = tok.piece(t.id);
    tokens.push_back(piece);
    values.push_back(t.logprob);
    Json top = Json::object();
    for (const TopLogprob& a : t.top) top[tok.piece(a.id)] = a.logprob;
    tops.push_back(std::move(top));
    offsets.push_back(offset);
    offset += piece.size();
  }
  return Json{{"tokens", tokens},
              {"token_logprobs", values},
              {"top_logprobs", tops},
              {"text_offset", offsets}};
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
