// Perplexity of a text, and the KL divergence of a model's next-token distributions to those
// of a base model saved earlier (docs/perplexity.md). The text is tokenized once; chunk i is
// tokens [i*n_ctx, (i+1)*n_ctx) with its first token replaced by BOS (when the tokenizer adds
// one), evaluated from an empty cache. Within a chunk, the logits at position j predict token
// j+1, for j in [first, n_ctx-1): first = 0 scores every prediction, first = n_ctx/2 is
// llama.cpp's llama-perplexity (the first half of each chunk is only context).
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "krafla/session.h"

namespace krafla {

struct PerplexityOptions {
  int n_ctx = 512;        // tokens per chunk
  int first = 0;          // the first scored position of a chunk (0 .. n_ctx-2)
  int max_chunks = -1;    // < 0: every whole chunk of the text
  int32_t bos_id = -1;    // put at the start of every chunk; -1: the tokens stay as they are
  int n_batch = 128;      // tokens per forward step
  std::string kl_base;    // non-empty: compare with this base file (written by save_base)
  std::string save_base;  // non-empty: write this model's log-probabilities here (the base)
};

// Running totals; ppl() and the KL figures are valid at any point.
struct PerplexityResult {
  int n_chunks = 0;        // chunks scored so far
  int n_chunks_total = 0;  // chunks that will be scored
  int64_t n_scored = 0;    // predictions scored
  double sum_nll = 0, sum_nll2 = 0;
  double seconds = 0;
  // With a base file: per-prediction KL(base || this), the base's NLL and top-1 agreement.
  bool has_base = false;
  std::vector<float> kl;  // one per scored prediction
  double sum_nll_base = 0;
  int64_t same_top = 0;

  double ppl() const;         // exp(mean NLL)
  double ppl_stderr() const;  // ppl · standard error of the mean NLL
  double ppl_base() const;    // the base's perplexity on the same predictions
  double kl_mean() const;
  double kl_stderr() const;
  double kl_quantile(double q) const;  // e.g. 0.99 (sorts a copy)
  double top1_agreement() const;       // fraction of predictions with the same argmax
};

// Chunks `tokens` (the whole text, tokenized with add_special) and scores them on `session`
// (its n_ctx must be at least opts.n_ctx). After each chunk, on_chunk(result) is called;
// returning false stops early (the result so far is returned). Throws krafla::Error when the
// text has fewer than two chunks' worth of tokens (llama-perplexity's rule too), when the
// base file is unreadable, truncated or was made from other tokens or another vocabulary.
PerplexityResult perplexity(Session& session, std::span<const int32_t> tokens,
                            const PerplexityOptions& opts,
                            const std::function<bool(const PerplexityResult&)>& on_chunk = {});

// Throws, before any work, what perplexity() would throw for a text of n_tokens tokens on a
// model of n_vocab tokens and a session of session_ctx: a bad chunk size or scored range, fewer
// than two chunks, a base file that cannot be read, is cut or was made with other settings.
void check_perplexity(size_t n_tokens, int n_vocab, int session_ctx, const PerplexityOptions& opts);

// NLL of token `target` under `logits` (log-sum-exp in double), i.e. -log softmax[target].
double token_nll(std::span<const float> logits, int32_t target);

}  // namespace krafla
