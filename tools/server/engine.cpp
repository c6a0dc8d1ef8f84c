#include "server/engine.h"

#include <fmt/format.h>

#include <chrono>

#include "krafla/chat.h"
#include "krafla/error.h"
#include "krafla/generate.h"
#include "stop_filter.h"

namespace krafla::server {

Engine::Engine(const Model& model, const SessionOptions& opts, std::string model_id,
               std::string chat_name)
    : model_(model),
      model_id_(std::move(model_id)),
      chat_name_(chat_name.empty() ? model.config().chat_template : std::move(chat_name)),
      session_(model, opts),
      n_ctx_(session_.n_ctx()) {
  if (!chat_name_.empty()) chat_template(chat_name_);  // an unknown name fails at startup
  chat_stop_ids_ = stop_ids_for(model, chat_name_);
  text_stop_ids_ = stop_ids_for(model, "");
}

std::vector<int32_t> Engine::prepare(const CompletionRequest& r) const {
  if (!r.model.empty() && r.model != model_id_)
    throw ApiError(
        404,
        fmt::format("The model '{}' does not exist; this server serves '{}'.", r.model, model_id_),
        "invalid_request_error", "model", "model_not_found");
  const Tokenizer& tok = model_.tokenizer();
  std::vector<int32_t> ids;
  const char* param = r.endpoint == Endpoint::kChat ? "messages" : "prompt";
  if (r.endpoint == Endpoint::kChat) {
    if (chat_name_.empty())
      throw ApiError::invalid(
          "The model names no chat template; restart ml_server with "
          "--chat NAME or use /v1/completions.",
          "messages");
    std::string text;
    try {
      text = chat_template(chat_name_).render(r.messages, true);
    } catch (const Error& e) {
      throw ApiError::invalid(e.what(), "messages", "invalid_value");
    }
    ids = tok.encode(text, false);  // the template writes BOS itself
  } else if (r.prompt_is_ids) {
    for (int32_t id : r.prompt_ids)
      if (id >= model_.config().n_vocab)
        throw ApiError::invalid(fmt::format("Token id {} is outside the vocabulary (size {}).", id,
                                            model_.config().n_vocab),
                                "prompt", "invalid_value");
    ids = r.prompt_ids;
  } else {
    ids = tok.encode(r.prompt_text, true);
  }
  if (ids.empty())
    throw ApiError::invalid("The prompt is empty (it encodes to no tokens).", param,
                            "invalid_value");
  // One slot must stay free for the first generated token.
  if (int(ids.size()) >= n_ctx_)
    throw ApiError::invalid(
        fmt::format("This model's context is {} tokens (--ctx), but the prompt has {} tokens; "
                    "shorten the {} or restart ml_server with a larger --ctx.",
                    n_ctx_, ids.size(), param),
        param, "context_length_exceeded");
  return ids;
}

RunResult Engine::run(const CompletionRequest& r, const std::vector<int32_t>& prompt,
                      const std::function<bool(const std::string&)>& on_text) {
  std::lock_guard lock(queue_);
  if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error");
  const auto t0 = std::chrono::steady_clock::now();
  RunResult res;
  res.usage.prompt_tokens = int(prompt.size());
  res.usage.cached_tokens = session_.reuse_prefix(prompt);
  session_.eval(std::span<const int32_t>(prompt).subspan(res.usage.cached_tokens));

  Sampler sampler(r.sampler);
  GenerateOptions go;
  go.max_tokens = r.max_tokens;
  go.stop_ids = r.endpoint == Endpoint::kChat ? chat_stop_ids_ : text_stop_ids_;
  cli::StopFilter filter(r.stop);
  bool cancelled = false;
  auto emit = [&](const std::string& text) {
    if (!text.empty() && !on_text(text)) cancelled = true;
  };
  const GenerateResult g = generate(session_, sampler, go, [&](int32_t, const std::string& text) {
    if (filter.hit() || cancelled) return false;  // generate's final flush after a cut
    emit(filter.push(text));
    return !filter.hit() && !cancelled && !stopping_;
  });
  if (!filter.hit() && !cancelled) emit(filter.flush());

  res.usage.completion_tokens = g.n_tokens;
  if (filter.hit())
    res.finish_reason = "stop";
  else if (cancelled)
    res.finish_reason = "cancelled";
  else if (g.finish_reason == "cancelled")
    res.finish_reason = stopping_ ? "shutdown" : "cancelled";
  else if (g.finish_reason == "context")
    res.finish_reason = "length";  // OpenAI has no separate reason for a full context
  else
    res.finish_reason = g.finish_reason;
  res.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return res;
}

}  // namespace krafla::server
