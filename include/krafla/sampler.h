// Token sampling: repetition penalty, temperature, top-k, top-p, seeded RNG.
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
  float repeat_penalty = 1.1f;  // 1: off (llama.cpp's rule: divide positive logits, multiply negative)
  int repeat_last_n = 64;
  uint64_t seed = 0xC0FFEE;
};

class Sampler {
 public:
  explicit Sampler(const SamplerParams& p);
  // `recent` are the tokens the penalty looks at (the last repeat_last_n are used).
  int32_t sample(std::span<const float> logits, std::span<const int32_t> recent);
  const SamplerParams& params() const { return p_; }

 private:
  SamplerParams p_;
  std::mt19937_64 rng_;
  std::vector<std::pair<float, int32_t>> cand_;
};

}  // namespace krafla
