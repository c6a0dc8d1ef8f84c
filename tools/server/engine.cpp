#include "server/engine.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <nlohmann/json.hpp>

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

// One choice of one request. The fields above `out` belong to the scheduler thread; `out`
// onwards are shared with the waiting HTTP thread under Engine::m_.
struct Job {
  Job(const CompletionRequest& req, const Prepared& p, int index, const Tokenizer& tok,
      const std::vector<int32_t>& stops, std::condition_variable& waiter)
      : r(req),
        prompt(p.ids),
        choice(index),
        sampler(seeded(req.sampler, index)),
        dec(tok, true),
        filter(req.stop),
        stop_ids(stops),
        call_schemas(p.call_schemas),
        cv(waiter) {
    if (p.format) matcher.emplace(*p.format);
  }
  static SamplerParams seeded(SamplerParams p, int choice) {
    p.seed += uint64_t(choice);
    return p;
  }

  const CompletionRequest& r;
  const std::vector<int32_t>& prompt;
  int choice;
  Clock::time_point arrived = Clock::now(), started;
  int slot = -1;
  size_t fed = 0;     // prompt tokens in the slot's cache
  int32_t next = -1;  // a sampled token still to feed to the slot, or -1
  // --lookup, --draft: the step feeds `feed` (next, then its draft) and keeps every row's
  // logits
  std::vector<int32_t> feed;
  size_t n_draft = 0;
  std::vector<float> rows;
  std::optional<Sampler> draft_sampler;  // --draft: the request's settings, its own seed
  std::optional<Drafter> drafter;        // --draft: the slot's sequence of the draft session
  int n_generated = 0;
  Sampler sampler;
  Tokenizer::StreamDecoder dec;
  cli::StopFilter filter;
  const std::vector<int32_t>& stop_ids;
  std::optional<JsonMatcher> matcher;  // with response_format
  std::vector<float> masked;           // the logits the matcher allows
  const std::vector<std::pair<std::string, JsonSchema>>& call_schemas;
  std::string json;       // the bytes the matcher has accepted (while call_schemas may apply)
  bool switched = false;  // the matcher is the named tool's

  std::vector<Piece> out;  // what the HTTP thread has not taken yet
  bool done = false;
  RunResult result;
  std::atomic<bool> cancelled{false};
  std::condition_variable& cv;  // the waiting HTTP thread's (one for all choices)
};

namespace {
// The log-softmax of `logits` at `id`, and the `top` most likely tokens (most likely first,
// lower id first among equals).
TokenLogprob logprob_of(std::span<const float> logits, int32_t id, int top) {
  const float mx = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float l : logits) sum += std::exp(double(l) - mx);
  const float log_z = mx + float(std::log(sum));
  TokenLogprob t{id, logits[size_t(id)] - log_z, {}};
  auto better = [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  };
  std::vector<int32_t> best;  // kept sorted, at most `top`
  for (int32_t i = 0; i < int32_t(logits.size()) && top > 0; ++i) {
    if (int(best.size()) == top && !better(i, best.back())) continue;
    best.insert(std::upper_bound(best.begin(), best.end(), i, better), i);
    if (int(best.size()) > top) best.pop_back();
  }
  for (int32_t i : best) t.top.push_back({i, logits[size_t(i)] - log_z});
  return t;
}
// tool_choice "required" (or a named function): the prompt ends with the template's opening
// of a call, and the reply is held to the call's JSON, so even a model that would not call a
// tool writes a well-formed call to one of them.
std::string required_call_prefix(const ChatTemplate& t) {
  if (t.tool_format == ToolFormat::kJsonInTags) return std::string(t.tool_call_open()) + "\n";
  if (t.tool_format == ToolFormat::kJsonReply) return "";
  throw ApiError::invalid(
      fmt::format("tool_choice \"required\" is not implemented for the chat template '{}' "
                  "(its calls are not JSON); use \"auto\".",
                  t.name),
      "tool_choice", "unsupported_parameter");
}

// The call's schema: {"name": one of the tools, "arguments": …} ("parameters" for Llama 3.1).
// With one candidate its parameters schema holds the arguments; with several, the arguments
// are any object at first, and once the name is written the job switches to that tool's own
// schema (Prepared::call_schemas).
JsonSchema call_schema(const ChatTemplate& t, const nlohmann::ordered_json& names,
                       const nlohmann::ordered_json& params) {
  using J = nlohmann::ordered_json;
  const char* args = t.tool_format == ToolFormat::kJsonReply ? "parameters" : "arguments";
  auto schema = [&](const J& p) {
    return J{{"type", "object"},
             {"properties", {{"name", {{"enum", names}}}, {args, p}}},
             {"required", J::array({"name", args})},
             {"additionalProperties", false}};
  };
  try {
    return JsonSchema::parse(schema(params));
  } catch (const Error&) {  // a parameter schema beyond the subset: any object
    return JsonSchema::parse(schema(J{{"type", "object"}}));
  }
}

void required_call(const ChatTemplate& t, const CompletionRequest& r, Prepared& out) {
  using J = nlohmann::ordered_json;
  J names = J::array();
  std::vector<std::pair<std::string, J>> params;
  for (const J& tool : J::parse(r.tools_json)) {
    const J& f = tool["function"];
    if (!r.tool_forced.empty() && f["name"] != r.tool_forced) continue;
    names.push_back(f["name"]);
    params.emplace_back(f["name"].get<std::string>(), f.value("parameters", J{{"type", "object"}}));
  }
  if (params.size() == 1) {
    out.format = call_schema(t, names, params[0].second);
    return;
  }
  out.format = call_schema(t, names, J{{"type", "object"}});
  for (const auto& [name, p] : params)
    out.call_schemas.emplace_back(name, call_schema(t, J::array({name}), p));
}

}  // namespace

Engine::Engine(const Model& model, const SessionOptions& opts, std::string model_id,
               std::string chat_name, EngineOptions eo)
    : model_(model),
      model_id_(std::move(model_id)),
      chat_name_(chat_name.empty() ? model.config().chat_template : std::move(chat_name)),
      eo_(eo),
      lookup_(eo.lookup > 0 && !model.config().has_linear()),
      session_(model, opts),
      n_ctx_(session_.n_ctx()),
      slots_(size_t(session_.n_seqs())) {
  if (!chat_name_.empty()) chat_template(chat_name_);  // an unknown name fails at startup
  chat_stop_ids_ = stop_ids_for(model, chat_name_);
  text_stop_ids_ = stop_ids_for(model, "");
  stats_.slots = session_.n_seqs();
  // The scheduler thread runs both sessions, one at a time.
  if (eo_.draft_model && !lookup_ && !model.config().has_linear() &&
      !eo_.draft_model->config().has_linear())
    draft_session_.emplace(*eo_.draft_model,
                           draft_session_options(*eo_.draft_model, session_, "--draft"));
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

std::string Engine::speculative() const {
  if (lookup_) return "lookup";
  return draft_session_ ? "draft" : "";
}

EngineStats Engine::stats() const {
  std::lock_guard l(m_);
  return stats_;
}

Prepared Engine::prepare(const CompletionRequest& r) const {
  Prepared out;
  out.format = r.format;
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
    const ChatTemplate& tmpl = chat_template(chat_name_);
    if (!r.tools_json.empty() && !tmpl.supports_tools())
      throw ApiError::invalid(
          fmt::format("The chat template '{}' has no tool calling (templates with tools: "
                      "docs/server.md); send the request without tools.",
                      chat_name_),
          "tools", "invalid_value");
    std::string text;
    try {
      text = tmpl.render(r.messages, true, r.tools_json);
    } catch (const Error& e) {
      throw ApiError::invalid(e.what(), "messages", "invalid_value");
    }
    if (r.tool_required) {
      out.reply_prefix = required_call_prefix(tmpl);
      required_call(tmpl, r, out);
      text += out.reply_prefix;
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
  out.ids = std::move(ids);
  return out;
}

std::vector<RunResult> Engine::run(const CompletionRequest& r, const Prepared& prompt,
                                   const std::function<bool(int, const Piece&)>& on_piece,
                                   const std::function<bool()>& alive) {
  std::condition_variable cv;
  std::vector<std::shared_ptr<Job>> jobs;
  const auto& stops = r.endpoint == Endpoint::kChat ? chat_stop_ids_ : text_stop_ids_;
  for (int i = 0; i < r.n; ++i)
    jobs.push_back(std::make_shared<Job>(r, prompt, i, model_.tokenizer(), stops, cv));
  std::unique_lock lock(m_);
  if (stopping_) throw ApiError(503, "The server is shutting down.", "server_error");
  for (auto& j : jobs) queue_.push_back(j);
  stats_.queued += r.n;
  wake_.notify_all();
  auto all_done = [&] {
    return std::all_of(jobs.begin(), jobs.end(), [](auto& j) { return j->done && j->out.empty(); });
  };
  auto any_out = [&] {
    return std::any_of(jobs.begin(), jobs.end(), [](auto& j) { return !j->out.empty(); });
  };
  auto last_check = Clock::now();
  bool ok = true;
  while (!all_done()) {
    cv.wait_for(lock, std::chrono::milliseconds(250), [&] { return all_done() || any_out(); });
    for (auto& j : jobs) {
      if (j->out.empty()) continue;
      std::vector<Piece> pieces = std::move(j->out);
      j->out.clear();
      lock.unlock();
      for (const Piece& p : pieces) ok = ok && on_piece(j->choice, p);
      lock.lock();
    }
    if (ok && alive && seconds_since(last_check) >= 0.25) {
      last_check = Clock::now();
      lock.unlock();
      ok = alive();
      lock.lock();
    }
    if (!ok && !jobs[0]->cancelled) {
      for (auto& j : jobs) j->cancelled = true;
      wake_.notify_all();
    }
  }
  std::vector<RunResult> results;
  for (auto& j : jobs) {
    if (j->result.finish_reason == "error")
      throw ApiError(500, "The model failed: " + j->result.error, "server_error");
    if (j->slot < 0 &&
        (j->result.finish_reason == "shutdown" || j->result.finish_reason == "timeout"))
      throw ApiError(503,
                     j->result.finish_reason == "shutdown"
                         ? std::string("The server is shutting down.")
                         : fmt::format("The request waited {:.0f} s for one of the {} slots and "
                                       "ran out of time (ml_server --timeout); try again later.",
                                       j->result.queued, slots_.size()),
                     "server_error", "", j->result.finish_reason == "timeout" ? "server_busy" : "");
    results.push_back(j->result);
  }
  return results;
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
  while (!queue_.empty()) {
    const std::shared_ptr<Job>& j = queue_.front();
    int best = -1, best_len = -1;
    for (int t = 0; t < int(slots_.size()); ++t) {
      if (slots_[t]) continue;
      const int len = session_.shared_prefix(j->prompt, t);
      if (len > best_len) best = t, best_len = len;
    }
    if (best < 0) return;  // every slot is busy
    j->slot = best;
    j->started = Clock::now();
    j->result.queued = std::chrono::duration<double>(j->started - j->arrived).count();
    j->fed = size_t(session_.reuse_prefix(j->prompt, best));
    j->result.usage.prompt_tokens = int(j->prompt.size());
    j->result.usage.cached_tokens = int(j->fed);
    ++stats_.requests;
    ++stats_.active;
    --stats_.queued;
    stats_.prompt_tokens += j->prompt.size();
    stats_.cached_tokens += j->fed;
    slots_[best] = j;
    queue_.pop_front();
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
    try {
      step();
    } catch (const std::exception& e) {
      // The step's slots cannot go on (a NaN in the logits, memory): their requests fail with
      // the reason, the server keeps serving.
      for (auto& j : slots_)
        if (j) {
          const int slot = j->slot;
          j->result.error = e.what();
          finish(*j, "error");
          session_.truncate(0, slot);  // its cache may hold half a step
          if (draft_session_) draft_session_->truncate(0, slot);
        }
    }
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
    if (j && j->next >= 0) fresh.push_back(j.get());
  draft(fresh);
  for (Job* j : fresh) {
    work.push_back({j->slot, j->feed, j->n_draft ? &j->rows : nullptr});
    rows += int(j->feed.size());
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

void Engine::emit(Job& j, const std::string& text, std::vector<TokenLogprob> lps) {
  if (text.empty() && lps.empty()) return;
  std::lock_guard l(m_);
  j.out.push_back({text, std::move(lps)});
  j.cv.notify_all();
}

// response_format: the logits with every token the JSON matcher refuses at -inf (once the
// value is complete, only the end-of-turn tokens stay).
std::span<const float> Engine::constrain(Job& j) {
  if (!json_filter_) json_filter_ = std::make_unique<TokenFilter>(model_.tokenizer());
  const std::vector<float>& logits = session_.logits(j.slot);
  j.masked.assign(logits.begin(), logits.end());
  json_filter_->apply(*j.matcher, j.masked, j.stop_ids);
  return j.masked;
}

// What the next step feeds each job's slot: the token it sampled, then (with --lookup or
// --draft) a draft of what may follow it, no longer than the tokens the request and the
// context have left. The draft model drafts for all the slots together (Drafter::draw_all: one
// forward step of it per drafted position, whatever the number of slots).
void Engine::draft(std::span<Job* const> jobs) {
  std::vector<Job*> drafted;
  std::vector<Drafter*> drafters;
  std::vector<std::vector<int32_t>> hists;
  std::vector<int> caps;
  const auto add = [](Job& j, const std::vector<int32_t>& d) {
    j.feed.insert(j.feed.end(), d.begin(), d.end());
    j.n_draft = d.size();
  };
  for (Job* jp : jobs) {
    Job& j = *jp;
    j.feed.assign(1, j.next);
    j.n_draft = 0;
    if ((!lookup_ && !draft_session_) || j.matcher) continue;
    std::vector<int32_t> hist = session_.history(j.slot);
    hist.push_back(j.next);
    int cap = std::min(lookup_ ? eo_.lookup : eo_.draft_max, n_ctx_ - int(hist.size()));
    if (j.r.max_tokens >= 0) cap = std::min(cap, j.r.max_tokens - j.n_generated - 1);
    if (cap <= 0) continue;
    if (lookup_) {
      add(j, lookup_draft(hist, eo_.lookup_ngram, cap));
      continue;
    }
    if (!j.drafter) {
      j.draft_sampler.emplace(draft_sampler_params(Job::seeded(j.r.sampler, j.choice)));
      j.drafter.emplace(*draft_session_, *j.draft_sampler, eo_.draft_p_min, j.slot);
    }
    drafted.push_back(&j);
    drafters.push_back(&*j.drafter);
    hists.push_back(std::move(hist));
    caps.push_back(cap);
  }
  if (drafted.empty()) return;
  const std::vector<std::span<const int32_t>> hs(hists.begin(), hists.end());
  const std::vector<std::vector<int32_t>> d = Drafter::draw_all(drafters, hs, caps);
  for (size_t i = 0; i < drafted.size(); ++i) add(*drafted[i], d[i]);
}

// After a step gave j's slot fresh logits: the next token, as generate() would pick it. With a
// draft, each drafted token the sampler picks from the row before it is kept (it is in the
// cache already) and the next row is sampled from; the first it does not pick ends the run,
// and the cache is cut back to the tokens kept.
void Engine::advance(Job& j) {
  const size_t V = size_t(model_.config().n_vocab);
  const int base = session_.n_past(j.slot) - int(j.feed.size());  // where feed[0] stands
  for (size_t r = 0;; ++r) {
    const std::span<const float> row = j.n_draft ? std::span<const float>(j.rows).subspan(r * V, V)
                                                 : std::span<const float>(session_.logits(j.slot));
    const int pos = base + int(std::min(r + 1, j.feed.size()));  // tokens before the new one
    int32_t id = -1;
    const bool ruled = j.drafter && r < j.n_draft;  // a draft model's token: the standard rule
    const char* end =
        ruled ? take(j, row, pos, id, &j.feed[r + 1], j.drafter->q()[r]) : take(j, row, pos, id);
    if (!end && r < j.n_draft && id == j.feed[r + 1]) continue;
    if (j.n_draft) {
      session_.truncate(pos, j.slot);
      std::lock_guard l(m_);
      stats_.drafted_tokens += j.n_draft;
      stats_.accepted_tokens += r;
    }
    if (end) return finish(j, end);  // the last use of j: finish may free it
    j.next = id;
    return;
  }
}

const char* Engine::take(Job& j, std::span<const float> row, int pos, int32_t& id,
                         const int32_t* drafted, std::span<const TokenProb> q) {
  if (j.r.max_tokens >= 0 && j.n_generated >= j.r.max_tokens) return "length";
  if (j.matcher && j.matcher->done() && j.stop_ids.empty()) return "stop";
  const std::span<const float> logits = j.matcher ? constrain(j) : row;
  const std::vector<int32_t>& hist = session_.history(j.slot);
  const auto recent = std::span<const int32_t>(hist).first(size_t(pos));
  id = drafted ? j.sampler.sample_draft(logits, recent, *drafted, q)
               : j.sampler.sample(logits, recent);
  if (std::find(j.stop_ids.begin(), j.stop_ids.end(), id) != j.stop_ids.end()) return "stop";
  if (j.matcher) accept_json(j, model_.tokenizer().piece(id));
  ++j.n_generated;
  std::vector<TokenLogprob> lps;
  if (j.r.logprobs) lps.push_back(logprob_of(row, id, j.r.top_logprobs));
  emit(j, j.filter.push(j.dec.push(id)), std::move(lps));
  if (j.filter.hit()) return "stop";
  if (pos >= n_ctx_) return "length";  // the context is full
  return nullptr;
}

// A required call among several tools: once the reply names its tool, that tool's own schema
// holds the arguments (the bytes so far are fed to a matcher of it, which takes them: the name
// is all they fix).
void Engine::accept_json(Job& j, const std::string& piece) {
  j.matcher->accept(piece);
  if (j.call_schemas.empty() || j.switched) return;
  j.json += piece;
  for (const auto& [name, schema] : j.call_schemas) {
    const std::string quoted = nlohmann::json(name).dump();
    size_t at = j.json.find(quoted);
    if (at == std::string::npos) continue;
    at = j.json.find_first_not_of(" \t\r\n", at + quoted.size());
    if (at == std::string::npos || j.json[at] != ',') continue;  // the name is not complete
    JsonMatcher m(schema);
    if (!m.accept(j.json)) continue;
    j.matcher = std::move(m);
    j.switched = true;
    return;
  }
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
