#include "krafla/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace krafla {
namespace {
// Plain sampling at temperature `temp`: no top-k, top-p or repetition penalty.
SamplerParams plain(float temp) {
  SamplerParams p;
  p.temperature = temp;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.repeat_penalty = 1;
  return p;
}
}  // namespace

TEST(Sampler, GreedyIsArgmax) {
  Sampler s(plain(0));
  std::vector<float> l = {0.1f, 3.0f, -2.0f, 2.9f};
  EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, RepeatPenaltyFollowsLlamaCppRule) {
  SamplerParams p;
  p.temperature = 0;
  p.repeat_penalty = 2.0f;
  Sampler s(p);
  // 3.0 / 2 = 1.5 < 2.9: the penalised token loses; a negative logit is multiplied.
  std::vector<float> l = {0.1f, 3.0f, -2.0f, 2.9f};
  std::vector<int32_t> recent = {1};
  EXPECT_EQ(s.sample(l, recent), 3);
  std::vector<float> neg = {-1.0f, -1.5f};
  std::vector<int32_t> r0 = {0};
  EXPECT_EQ(s.sample(neg, r0), 1);  // -1*2 = -2 < -1.5
}

TEST(Sampler, TopKOneIsGreedy) {
  SamplerParams p = plain(5.0f);
  p.top_k = 1;
  Sampler s(p);
  std::vector<float> l = {0.0f, 0.5f, 0.4f};
  for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(l, {}), 1);
}

TEST(Sampler, SameSeedSameSequence) {
  SamplerParams p = plain(1.0f);
  p.seed = 42;
  Sampler a(p), b(p);
  std::vector<float> l(50);
  for (int i = 0; i < 50; ++i) l[i] = std::sin(i * 0.7f);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 100; ++i) {
    sa.push_back(a.sample(l, {}));
    sb.push_back(b.sample(l, {}));
  }
  EXPECT_EQ(sa, sb);
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  Sampler s(plain(1.0f));
  std::vector<float> l = {0.0f, std::log(3.0f)};  // probabilities 1/4, 3/4
  int ones = 0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) ones += s.sample(l, {}) == 1;
  // Binomial sd = sqrt(n*0.75*0.25) ≈ 61: 6 sd bound.
  EXPECT_NEAR(ones, 0.75 * n, 370);
}

TEST(Sampler, TopPKeepsSmallestNucleus) {
  SamplerParams p = plain(1.0f);
  p.top_p = 0.5f;
  Sampler s(p);
  std::vector<float> l = {std::log(0.6f), std::log(0.3f), std::log(0.1f)};
  for (int i = 0; i < 200; ++i) EXPECT_EQ(s.sample(l, {}), 0);
}

}  // namespace krafla
