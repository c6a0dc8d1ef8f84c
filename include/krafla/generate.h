// The decode loop shared by ml_run, the chat mode and ml_server.
#pragma once
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "krafla/sampler.h"
#include "krafla/session.h"

namespace krafla {

struct GenerateOptions {
  int max_tokens = -1;            // < 0: until a stop token or the context is full
  std::vector<int32_t> stop_ids;  // sampling one of these ends the turn (not emitted)
  bool skip_special = true;       // hide special tokens from the text
  // Speculative decoding by prompt lookup: after each sampled token, up to `lookup` tokens that
  // followed the latest earlier occurrence of the context's last 1..lookup_ngram tokens are
  // evaluated with it in one batched pass; each is kept while the sampler, drawing from the
  // pass's logits as it would have one token at a time, picks it. The output is the same as
  // without it, token for token, at any temperature (the logits of a row do not depend on the
  // batch; the sampler sees the same logits, history and random draws). 0: off. Not for models
  // with DeltaNet layers (their state cannot be cut back past a rejected draft).
  int lookup = 0;
  int lookup_ngram = 3;
  // Speculative decoding with a draft model (same tokenizer, usually far smaller): after each
  // sampled token, up to n_draft tokens drawn from draft_session's model by draft_sampler (the
  // same sampling settings, its own seed) are evaluated with it in one batched pass and checked
  // by the standard rule (Sampler::sample_draft): at temperature 0 the text is the plain one,
  // token for token; when sampling, every token has the plain distribution. Drafting stops
  // early when the draft model's own probability of its token (softmax at temperature 1) is
  // below draft_p_min. The draft session follows the turn (it evaluates what the main one
  // does, catching up when a draft is called for). Ignored when lookup is on; not for models
  // with DeltaNet layers (either of them).
  Session* draft_session = nullptr;
  Sampler* draft_sampler = nullptr;
  int n_draft = 8;
  float draft_p_min = 0.5f;
};

struct GenerateResult {
  int n_tokens = 0;           // tokens sampled (stop token not counted)
  std::string finish_reason;  // "stop", "length", "context" or "cancelled"
  double seconds = 0;         // wall time of the loop
  std::vector<int32_t> tokens;
  // The speculative decoding that was on: "" (none), "lookup" or "draft" (asked for, and the
  // models allow it).
  std::string speculative;
  int n_passes = 0;    // batched passes that carried drafts
  int n_drafted = 0;   // tokens drafted
  int n_accepted = 0;  // drafted tokens kept
};

// Prompt lookup's draft: the up to n_draft tokens that followed the latest earlier occurrence of
// the last g tokens of `tokens`, for the largest g <= max_ngram that occurs; empty when none.
std::vector<int32_t> lookup_draft(std::span<const int32_t> tokens, int max_ngram, int n_draft);

// The draft model's side of speculative decoding (generate() and ml_server --draft): sequence
// `seq` of a draft session follows a token history, and each draw() draws a draft from it,
// keeping the distribution every token was drawn from for the standard rule.
class Drafter {
 public:
  // p_min: drafting stops when the draft model's own probability of its token (softmax at
  // temperature 1) is below it (0: never).
  Drafter(Session& s, Sampler& sampler, float p_min, int seq = 0);
  // Up to n tokens continuing `hist` (the sequence first catches up with it, keeping the
  // prefix it shares); q()[i] is the distribution token i was drawn from.
  std::vector<int32_t> draw(std::span<const int32_t> hist, int n);
  // draw() for several drafters of one session at once (ml_server's slots; each with a sampler
  // of its own): every drafted position is one forward step for all the sequences still
  // drafting, and each gets the tokens draw() gives it alone (a sequence's logits do not
  // depend on the batch). Drafters with n <= 0 draw nothing. Throws krafla::Error for
  // drafters of different sessions.
  static std::vector<std::vector<int32_t>> draw_all(std::span<Drafter* const> drafters,
                                                    std::span<const std::span<const int32_t>> hists,
                                                    std::span<const int> n);
  const std::vector<std::vector<TokenProb>>& q() const { return q_; }

 private:
  float own_probability(std::span<const float> logits, int32_t x);

  Session& s_;
  Sampler& sampler_;
  float p_min_;
  int seq_;
  std::vector<std::vector<TokenProb>> q_;
  std::vector<float> soft_;  // own_probability's scratch
};

// A draft model's session beside `main` (generate()'s draft_session, ml_server's slots): main's
// threads (shared), context, batch, KV type and number of sequences. Throws krafla::Error,
// starting with `name` (e.g. "--draft FILE"), when the draft model's context is shorter.
SessionOptions draft_session_options(const Model& draft, const Session& main,
                                     std::string_view name);
// The draft model's sampler: main's settings with a seed of its own (not main's stream).
SamplerParams draft_sampler_params(SamplerParams main);

// Precondition: session.logits() are the last prompt token's logits. For every sampled token,
// on_text(id, text) receives the text it completes (valid UTF-8, possibly empty); returning
// false cancels. The sampled tokens are fed back so the session holds the whole turn, except
// the final one when the loop ends by length.
GenerateResult generate(Session& session, Sampler& sampler, const GenerateOptions& opts,
                        const std::function<bool(int32_t, const std::string&)>& on_text);

// The stop ids for a model: its eos ids plus those of the named chat template's stop tokens.
std::vector<int32_t> stop_ids_for(const Model& model, const std::string& chat_template_name);

}  // namespace krafla
