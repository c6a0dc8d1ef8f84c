// The one model and the slots that serve it. Requests are tokenized and checked concurrently
// by the HTTP threads; a scheduler thread then runs them in `--parallel` slots, each a sequence
// of one Session: every step evaluates the next token of every generating slot together with
// prompt chunks of slots still reading their prompt (continuous batching), so N clients share
// each pass over the weights. A slot keeps its KV cache after its request ends, and a new
// request takes the free slot whose cache shares the longest prefix with its prompt. Requests
// beyond the slots wait in arrival order; none is turned away.
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "krafla/json_constraint.h"
#include "krafla/model.h"
#include "krafla/session.h"
#include "server/openai.h"
#include "server/request.h"

namespace krafla::server {

struct RunResult {
  Usage usage;
  // stop, length, cancelled (the client went away), timeout (--timeout), shutdown
  // (SIGINT/SIGTERM cut it short) or error (run() throws it as a 500)
  std::string finish_reason;
  double seconds = 0;  // from taking a slot to the end (queue wait excluded)
  double queued = 0;   // seconds waiting for a slot
  std::string error;   // with finish_reason "error": what failed
};

// What a waiting request receives as its reply grows: text (valid UTF-8, stop strings already
// cut; may be empty) and the log probabilities of the tokens sampled since the last piece
// (when the request asked for them).
struct Piece {
  std::string text;
  std::vector<TokenLogprob> logprobs;
};

// A request made ready to run: its prompt, and what the reply is held to.
struct Prepared {
  std::vector<int32_t> ids;          // the prompt
  std::optional<JsonSchema> format;  // response_format, or the call a required tool choice needs
  std::string reply_prefix;          // markup the prompt already wrote for the reply (a call's
                                     // opening tag when a tool call is required)
  // A required call among several tools: each tool's own call schema, for once it is named.
  std::vector<std::pair<std::string, JsonSchema>> call_schemas;
};

struct EngineOptions {
  double timeout = 0;  // seconds a request may take from its arrival; 0: no limit
  // Speculative decoding by prompt lookup (generate.h's lookup_draft): up to `lookup` tokens
  // drafted after each sampled one, checked in the same step; 0: off. Not with DeltaNet layers
  // or a response_format (the JSON matcher judges one token at a time).
  int lookup = 0;
  int lookup_ngram = 3;
  // Speculative decoding with a draft model (same tokenizer, far smaller; it must outlive the
  // engine): each slot's draft sequence follows the slot, and up to draft_max tokens drawn from
  // it (the request's sampling settings, a seed of its own) are checked in the same step by
  // the standard rule (Sampler::sample_draft). Null: off; ignored when lookup is on. Not with
  // DeltaNet layers or a response_format.
  const Model* draft_model = nullptr;
  int draft_max = 8;
  float draft_p_min = 0.5f;
};

// What the scheduler and the waiting HTTP thread share for one request (engine.cpp).
struct Job;

// Counters for GET /metrics, read while the engine runs.
struct EngineStats {
  uint64_t requests = 0, prompt_tokens = 0, cached_tokens = 0, generated_tokens = 0;
  uint64_t steps = 0;                              // forward steps of the scheduler
  double prefill_seconds = 0, decode_seconds = 0;  // time in steps with / without prompt rows
  uint64_t prefill_step_tokens = 0, decode_step_tokens = 0;
  uint64_t drafted_tokens = 0, accepted_tokens = 0;  // --lookup, --draft
  int queued = 0, active = 0, slots = 0;
};

class Engine {
 public:
  // `chat_name` overrides the model's own template ("" keeps it; the model may name none).
  // opts.n_seqs is the number of slots.
  Engine(const Model& model, const SessionOptions& opts, std::string model_id,
         std::string chat_name, EngineOptions eo = {});
  ~Engine();

  // The prompt's token ids and the reply's constraints. Throws ApiError: unknown model (404), a
  // template that cannot take the messages or tools, ids outside the vocabulary, or a prompt
  // that leaves no room in the context.
  Prepared prepare(const CompletionRequest& r) const;

  // Queues the request's r.n choices (choice i samples with seed + i), then blocks until all
  // end, calling on_piece(choice, piece) in the calling thread as each reply grows; returning
  // false cancels them all (the client went away), and so does `alive` returning false (asked
  // a few times a second while waiting). Returns one result per choice. Throws ApiError 503
  // when the server is shutting down (or --timeout passes) before the request got a slot.
  std::vector<RunResult> run(const CompletionRequest& r, const Prepared& prompt,
                             const std::function<bool(int, const Piece&)>& on_piece,
                             const std::function<bool()>& alive = {});
  const Tokenizer& tokenizer() const { return model_.tokenizer(); }

  // Ends every running generation and refuses new ones: called on SIGINT/SIGTERM.
  void shut_down();

  const std::string& model_id() const { return model_id_; }
  const std::string& chat_name() const { return chat_name_; }
  int n_ctx() const { return n_ctx_; }
  int n_slots() const { return session_.n_seqs(); }
  size_t kv_bytes() const { return session_.kv_bytes(); }
  // The speculative decoding the slots run: "" (none), "lookup" or "draft" (asked for, and the
  // models allow it).
  std::string speculative() const;
  EngineStats stats() const;

 private:
  void loop();                             // the scheduler thread
  void admit();                            // queued jobs into free slots
  void step();                             // one forward step over the active slots
  void draft(std::span<Job* const> jobs);  // what the next step feeds these jobs' slots
  void advance(Job& j);                    // sample j's next token(s) after a step
  // Samples j's next token from `row` (the logits after the first `pos` cached tokens) into
  // id and emits it; returns why j ends ("stop", "length"), or null to go on.
  // With `drafted` (a draft model's token for this row, drawn from the distribution q), the
  // token is picked by the standard rule instead.
  const char* take(Job& j, std::span<const float> row, int pos, int32_t& id,
                   const int32_t* drafted = nullptr, std::span<const TokenProb> q = {});
  void emit(Job& j, const std::string& text, std::vector<TokenLogprob> lps = {});
  std::span<const float> constrain(Job& j);  // the logits a response_format allows
  void accept_json(Job& j, const std::string& piece);
  void finish(Job& j, const std::string& reason);  // frees j's slot

  const Model& model_;
  std::string model_id_;
  std::string chat_name_;
  std::vector<int32_t> chat_stop_ids_, text_stop_ids_;
  EngineOptions eo_;
  bool lookup_;      // --lookup asked for and the model allows it (no DeltaNet layers)
  Session session_;  // one sequence per slot; used by the scheduler thread only
  std::optional<Session> draft_session_;      // --draft: the draft model's, a sequence per slot
  std::unique_ptr<TokenFilter> json_filter_;  // built for the first response_format request
  int n_ctx_;

  mutable std::mutex m_;          // guards queue_, stats_, stopping_ and the jobs' shared fields
  std::condition_variable wake_;  // the scheduler: work arrived or shutdown
  std::deque<std::shared_ptr<Job>> queue_;
  std::vector<std::shared_ptr<Job>> slots_;  // [n_slots] the job in each slot, or null
  EngineStats stats_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace krafla::server
