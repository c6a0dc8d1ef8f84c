// Token sampling: repetition penalty, temperature, top-k, top-p, min-p, seeded RNG.
//
// The steps, in order (each one sees what the previous left):
//   1. Repetition penalty: every distinct id among the last repeat_last_n tokens of `recent`
//      (all of them when repeat_last_n < 0, none when 0) has its logit divided by
//      repeat_penalty when positive, multiplied by it otherwise (llama.cpp's rule).
//   2. temperature <= 0: greedy, the highest logit (the lowest id among equals). Nothing else
//      applies and the RNG is not used.
//   3. Temperature: p = softmax(logit / temperature) over the whole vocabulary.
//   4. top-k: keep the top_k highest logits (ties: the lower id first).
//   5. top-p and min-p, both judged on the distribution top-k left (renormalised): top-p keeps
//      the smallest prefix, in order of decreasing p (ties: lower id first), whose mass reaches
//      top_p; min-p keeps the tokens with p >= min_p * p(best). A token must pass both, so the
//      order of these two does not matter (the result equals llama.cpp's top-p then min-p).
//   6. Draw one token from what is left, renormalised, by inverse CDF with the seeded RNG.
// Tokens with probability 0 (logit -inf, or an exp that underflows) are never drawn. A NaN
// logit, or none finite (all -inf, or +inf present), throws krafla::Error, greedy included.
#pragma once
#include <cstdint>
#include <random>
#include <span>
#include <vector>

namespace krafla {

struct SamplerParams {
  float temperature = 0.8f;  // <= 0: greedy
  int top_k = 40;            // <= 0: whole vocabulary
  float top_p = 0.95f;       // >= 1: off
  float min_p = 0.0f;        // drop tokens with p < min_p * p(best); 0: off
  // 1: off (llama.cpp's rule: divide positive logits, multiply negative)
  float repeat_penalty = 1.1f;
  int repeat_last_n = 64;
  uint64_t seed = 0xC0FFEE;
};

struct TokenProb {
  int32_t id;
  double p;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // `recent` are the tokens the penalty looks at (the last repeat_last_n are used).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent);
  // The distribution sample() would draw from for these inputs: every token it can return, in
  // increasing id order, with its probability (they sum to 1). Does not touch the RNG.
  std::vector<TokenProb> probabilities(std::span<const float> logits,
                                       std::span<const int32_t> recent);
  // Speculative sampling's check of a drafted token (Leviathan et al. 2023; Chen et al. 2023):
  // `draft` was drawn from the distribution q (increasing id order, as probabilities() gives
  // it). Keeps it with probability min(1, p(draft) / q(draft)), where p is what sample() would
  // draw from, and otherwise draws from max(0, p - q) renormalised, which never holds `draft`.
  // Whatever q is, the token returned is distributed as p. Greedy: sample()'s token.
  int32_t sample_draft(std::span<const float> logits, std::span<const int32_t> recent,
                       int32_t draft, std::span<const TokenProb> q);
  // One draw from a distribution such as probabilities() returns, with this sampler's RNG (no
  // draw when it holds a single token).
  int32_t draw(std::span<const TokenProb> d);
  const SamplerParams& params() const { return p_; }

 private:
  struct Cand {
    float key;  // a logit (top-k) or a probability (top-p without top-k)
    int32_t id;
  };
  enum class Form { Greedy, Dense, List };
  // Steps 1–5: leaves the candidates in greedy_, dense (prob_ >= dense_min_) or list form.
  Form prepare(std::span<const float> logits, std::span<const int32_t> recent);
  void collect_penalties(std::span<const float> logits, std::span<const int32_t> recent);
  bool penalised(int32_t id) const;
  void select_top(std::span<const float> logits, size_t k);
  Form prepare_top_k(std::span<const float> logits, size_t k);
  Form prepare_dense(std::span<const float> logits);
  void nucleus(float min_keep);

  SamplerParams p_;
  std::mt19937_64 rng_;
  // Scratch reused across calls, so the hot path allocates nothing once sized.
  std::vector<std::pair<int32_t, float>> pen_;  // (id, penalised logit), sorted by id
  std::vector<Cand> cand_;                      // candidates of the List form
  std::vector<double> weight_;                  // their unnormalised weights (List form)
  std::vector<float> prob_;                     // softmax of the whole vocabulary (Dense form)
  std::vector<float> block_sum_;                // sums of prob_ >= dense_min_ per block
  std::vector<double> hist_;                    // top-p: probability mass per float-exponent bin
  float dense_min_ = 0;                         // Dense form: tokens with prob_ >= this
  double total_ = 0;                            // the candidates' total weight
  int32_t greedy_ = 0;
};

}  // namespace krafla
