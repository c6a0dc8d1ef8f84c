// moe::route, the Mixture-of-Experts top-k (docs/format.md "Mixture of Experts"): softmax over
// all experts, the k largest probabilities with the lower index first among equal ones (what
// torch.topk gives), renormalised or not, returned in ascending expert order. Expected values
// worked by hand from those rules.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "ops/moe.h"

namespace krafla {
namespace {

struct Routed {
  std::vector<int32_t> experts;
  std::vector<float> weights;
};

Routed route(std::vector<float> logits, int k, bool norm) {
  Routed r{std::vector<int32_t>(k), std::vector<float>(k)};
  moe::route(logits.data(), int(logits.size()), k, norm, r.experts.data(), r.weights.data());
  return r;
}

TEST(MoeRoute, SoftmaxWeightsOfTheLargest) {
  // p = (1, 2, 4, 1) / 8: the two largest are experts 2 and 1
  const Routed r = route({0, std::log(2.0f), std::log(4.0f), 0}, 2, false);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{1, 2}));
  EXPECT_NEAR(r.weights[0], 0.25f, 1e-6);
  EXPECT_NEAR(r.weights[1], 0.5f, 1e-6);
  const Routed n = route({0, std::log(2.0f), std::log(4.0f), 0}, 2, true);
  EXPECT_NEAR(n.weights[0], 1.0f / 3, 1e-6);
  EXPECT_NEAR(n.weights[1], 2.0f / 3, 1e-6);
}

TEST(MoeRoute, TiesGoToTheLowerIndex) {
  // experts 1, 2, 3 tie for two places: 1 and 2 win
  EXPECT_EQ(route({0, 1, 1, 1}, 2, true).experts, (std::vector<int32_t>{1, 2}));
  // a tie at the top: k = 1 takes the first of them
  EXPECT_EQ(route({5, 3, 5, 5}, 1, true).experts, (std::vector<int32_t>{0}));
  EXPECT_EQ(route({3, 5, 2, 5}, 1, false).experts, (std::vector<int32_t>{1}));
}

TEST(MoeRoute, AllExpertsAndLargeLogits) {
  // k = E: every expert, in order, weights summing to one; max-subtraction keeps exp finite
  const Routed r = route({1000, 999, 1001}, 3, false);
  EXPECT_EQ(r.experts, (std::vector<int32_t>{0, 1, 2}));
  float sum = 0;
  for (float w : r.weights) sum += w;
  EXPECT_NEAR(sum, 1.0f, 1e-6);
  EXPECT_NEAR(r.weights[2] / r.weights[0], std::exp(1.0f), 1e-4);
}

TEST(MoeRoute, NanLogitsStillPickKDistinctExperts) {
  const float nan = std::nanf("");
  const Routed r = route({nan, nan, nan, nan}, 2, true);
  EXPECT_NE(r.experts[0], r.experts[1]);
  for (int32_t e : r.experts) EXPECT_TRUE(e >= 0 && e < 4);
}

}  // namespace
}  // namespace krafla
