#include "server/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "krafla/chat.h"
#include "krafla/error.h"
#include "krafla/generate.h"
#include "krafla/sampler.h"
#include "stop_filter.h"

namespace krafla::server {

using Clock = std::chrono::steady_clock;

namespace {
double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}
}  // namespace

// One request. The fields above `out` belong to the scheduler thread; `out` onwards are shared
// with the waiting HTTP thread under Engine::m_.
struct Job {
  Job(const CompletionRequest& req, const std::vector<int32_t>& ids, const Tokenizer& tok,
      const std::vector<int32_t>& stops)
      : r(req),
        prompt(ids),
        sampler(req.sampler),
        dec(tok, true),
        filter(req.stop),
        stop_ids(stops) {}

  const CompletionRequest& r;
  const std::vector<int32_t>& prompt;
  Clock::time_point arrived = Clock::now(), started;
  int slot = -1;
  size_t fed = 0;     // prompt tokens in the slot's cache
  int32_t next = -1;  // a sampled token still to feed to the slot, or -1
  int n_generated = 0;
  Sampler sampler;
  Tokenizer::StreamDecoder dec;
  cli::StopFilter filter;
  const std::vector<int32_t>& stop_ids;

  std::string out;  // text the HTTP thread has not taken yet
  bool done = false;
  RunResult result;
  std::atomic<bool> cancelled{false};
  std::condition_variable cv;  // the HTTP thread: text or the end
};

Engine::Engine(const Model& model, const SessionOptions& opts, std::string model_id,
               std::string chat_name, EngineOptions eo)
    : model_(model),
      model_id_(std::move(model_id)),
      chat_name_(chat_name.empty() ? model.config().chat_template : std::move(chat_name)),
      eo_(eo),
      session_(model, opts),
      n_ctx_(session_.n_ctx()),
      slots_(size_t(session_.n_seqs())) {
  if (!chat_name_.empty()) chat_template(chat_name_);  // an unknown name fails at startup
  chat_stop_ids_ = stop_ids_for(model, chat_name_);
  text_stop_ids_ = stop_ids_for(model, "");
  stats_.slots = session_.n_seqs();
  thread_ = std::thread([this] { loop(); });
}

Engine::~Engine() {
  shut_down();
  thread_.join();
}

void Engine::shut_down() {
  {
    std::lock_guard l(m_);
    stopping_ = true;
  }
  wake_.notify_all();
}

EngineStats Engine::stats() const {
  std::lock_guard l(m_);
  return stats_;
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
                      const std::function<bool(const std::string&)>& on_text,
                      const std::function<bool()>& alive) {
  auto job = std::make_shared<Job>(r, prompt, model_.tokenizer(),
                                   r.endpoint == Endpoint::kChat ? chat_stop_ids_ : text_stop_ids_);
  std::unique_lock lock(m_);
  if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error");
  queue_.push_back(job);
  ++stats_.queued;
  wake_.notify_all();
  auto last_check = Clock::now();
  for (;;) {
    job->cv.wait_for(lock, std::chrono::milliseconds(250),
                     [&] { return job->done || !job->out.empty(); });
    bool ok = true;
    if (!job->out.empty()) {
      std::string text = std::move(job->out);
      job->out.clear();
      lock.unlock();
      ok = on_text(text);
      lock.lock();
    } else if (job->done) {
      break;  // everything was taken before the end is reported
    }
    if (ok && alive && seconds_since(last_check) >= 0.25) {
      last_check = Clock::now();
      lock.unlock();
      ok = alive();
      lock.lock();
    }
    if (!ok && !job->cancelled) {
      job->cancelled = true;
      wake_.notify_all();
    }
  }
  if (job->result.finish_reason == "shutdown" && job->slot < 0)
    throw ApiError(503, "The server is shutting down.", "server_error");
  if (job->result.finish_reason == "timeout" && job->slot < 0)
    throw ApiError(503,
                   fmt::format("The request waited {:.0f} s for one of the {} slots and ran out "
                               "of time (ml_server --timeout); try again later.",
                               job->result.queued, slots_.size()),
                   "server_error", "", "server_busy");
  return job->result;
}

// Queued jobs take free slots, in arrival order; each takes the free slot whose cached tokens
// share the longest prefix with its prompt. Runs under m_.
void Engine::admit() {
  // Waiting jobs whose client left or whose time ran out end without a slot.
  std::erase_if(queue_, [&](const std::shared_ptr<Job>& j) {
    const bool late = eo_.timeout > 0 && seconds_since(j->arrived) > eo_.timeout;
    if (!j->cancelled && !late) return false;
    j->result.finish_reason = j->cancelled ? "cancelled" : "timeout";
    j->result.queued = seconds_since(j->arrived);
    j->done = true;
    j->cv.notify_all();
    --stats_.queued;
    return true;
  });
  for (int s = 0; s < int(slots_.size()) && !queue_.empty(); ++s) {
    if (slots_[s]) continue;
    std::shared_ptr<Job> j = queue_.front();
    queue_.pop_front();
    --stats_.queued;
    int best = s, best_len = -1;
    for (int t = 0; t < int(slots_.size()); ++t) {
      if (slots_[t]) continue;
      const int len = session_.shared_prefix(j->prompt, t);
      if (len > best_len) best = t, best_len = len;
    }
    j->slot = best;
    j->started = Clock::now();
    j->result.queued = std::chrono::duration<double>(j->started - j->arrived).count();
    j->fed = size_t(session_.reuse_prefix(j->prompt, best));
    j->result.usage.prompt_tokens = int(j->prompt.size());
    j->result.usage.cached_tokens = int(j->fed);
    ++stats_.requests;
    ++stats_.active;
    stats_.prompt_tokens += j->prompt.size();
    stats_.cached_tokens += j->fed;
    slots_[best] = std::move(j);
    s = -1;  // rescan: the slot chosen may not be s
  }
}

void Engine::loop() {
  for (;;) {
    bool stop;
    {
      std::unique_lock lock(m_);
      wake_.wait(lock, [&] { return stopping_ || !queue_.empty() || stats_.active > 0; });
      stop = stopping_;
      if (stop) {
        for (auto& j : queue_) {
          j->result.finish_reason = "shutdown";
          j->done = true;
          j->cv.notify_all();
        }
        queue_.clear();
        stats_.queued = 0;
        if (stats_.active == 0) return;
      } else {
        admit();
      }
    }
    // Jobs whose client went away, that ran out of time, or that shutdown cuts short.
    for (auto& j : slots_) {
      if (!j) continue;
      if (stop)
        finish(*j, "shutdown");
      else if (j->cancelled)
        finish(*j, "cancelled");
      else if (eo_.timeout > 0 && seconds_since(j->arrived) > eo_.timeout)
        finish(*j, "timeout");
    }
    step();
  }
}

// One forward step: the token each generating slot sampled last, then prompt chunks of the
// slots still reading their prompt, up to n_batch rows in all (decoding slots never wait for a
// long prompt to finish).
void Engine::step() {
  std::vector<SeqTokens> work;
  std::vector<Job*> fresh;  // jobs this step gives new logits
  int rows = 0, prompt_rows = 0;
  for (auto& j : slots_)
    if (j && j->next >= 0) {
      work.push_back({j->slot, std::span<const int32_t>(&j->next, 1)});
      fresh.push_back(j.get());
      ++rows;
    }
  std::vector<std::pair<Job*, int>> chunks;
  for (auto& j : slots_) {
    const int budget = session_.n_batch() - rows;
    if (budget <= 0) break;
    if (!j || j->next >= 0 || j->fed >= j->prompt.size()) continue;
    const int m = int(std::min<size_t>(j->prompt.size() - j->fed, size_t(budget)));
    work.push_back({j->slot, std::span<const int32_t>(j->prompt).subspan(j->fed, size_t(m))});
    chunks.push_back({j.get(), m});
    rows += m;
    prompt_rows += m;
  }
  if (work.empty()) return;
  const auto t0 = Clock::now();
  session_.eval_batch(work);
  const double dt = seconds_since(t0);
  {
    std::lock_guard l(m_);
    ++stats_.steps;
    (prompt_rows ? stats_.prefill_seconds : stats_.decode_seconds) += dt;
    stats_.prefill_step_tokens += prompt_rows;
    stats_.decode_step_tokens += rows - prompt_rows;
  }
  for (Job* j : fresh) j->next = -1;
  for (auto [j, m] : chunks) {
    j->fed += size_t(m);
    if (j->fed == j->prompt.size()) fresh.push_back(j);
  }
  for (Job* j : fresh) advance(*j);
}

void Engine::emit(Job& j, const std::string& text) {
  if (text.empty()) return;
  {
    std::lock_guard l(m_);
    j.out += text;
  }
  j.cv.notify_all();
}

// After a step gave j's slot fresh logits: the next token, as generate() would pick it.
void Engine::advance(Job& j) {
  if (j.r.max_tokens >= 0 && j.n_generated >= j.r.max_tokens) return finish(j, "length");
  const int32_t id = j.sampler.sample(session_.logits(j.slot), session_.history(j.slot));
  if (std::find(j.stop_ids.begin(), j.stop_ids.end(), id) != j.stop_ids.end())
    return finish(j, "stop");
  ++j.n_generated;
  emit(j, j.filter.push(j.dec.push(id)));
  if (j.filter.hit()) return finish(j, "stop");
  if (session_.n_past(j.slot) >= n_ctx_) return finish(j, "length");  // the context is full
  j.next = id;
}

void Engine::finish(Job& j, const std::string& reason) {
  if (reason != "cancelled" && !j.filter.hit()) {
    std::string tail = j.filter.push(j.dec.flush());
    if (!j.filter.hit()) tail += j.filter.flush();
    emit(j, tail);
  }
  const int slot = j.slot;
  std::shared_ptr<Job> keep = std::move(slots_[slot]);  // the slot is free from here on
  std::lock_guard l(m_);
  j.result.finish_reason = j.filter.hit() ? "stop" : reason;
  j.result.usage.completion_tokens = j.n_generated;
  j.result.seconds = seconds_since(j.started);
  j.done = true;
  --stats_.active;
  stats_.generated_tokens += uint64_t(j.n_generated);
  j.cv.notify_all();
}

}  // namespace krafla::server
