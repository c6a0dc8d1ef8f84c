// delta::Chunked (src/ops/delta.h): the chunked (WY / UT-transform) gated delta rule gives the
// outputs and the final state of the token-by-token one (kernels::delta_step) up to float
// rounding, for runs shorter than, equal to and longer than a chunk, from a non-zero state.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "ops/delta.h"

namespace krafla::delta {
namespace {

// n tokens laid out as Block lays them out: rows of [q | k | v | padding], gates (n, 2) apart.
struct Inputs {
  int64_t dk, dv, ld;
  std::vector<float> rows, decay, beta, state;

  Inputs(int64_t n, int64_t dk_, int64_t dv_, float min_decay, uint32_t seed)
      : dk(dk_), dv(dv_), ld(2 * dk_ + dv_ + 3) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::uniform_real_distribution<float> unit(0.0f, 1.0f);
    rows.resize(n * ld);
    for (float& x : rows) x = normal(rng);
    for (int64_t t = 0; t < n; ++t) {  // q and k l2-normalised (q times dk^-1/2), as in gates()
      l2norm(&rows[t * ld], dk, 1.0f / std::sqrt(float(dk)));
      l2norm(&rows[t * ld + dk], dk, 1.0f);
    }
    decay.resize(2 * n), beta.resize(2 * n);
    for (float& x : decay) x = min_decay + (1.0f - min_decay) * unit(rng);
    for (float& x : beta) x = unit(rng);
    state.resize(dk * dv);
    for (float& x : state) x = 0.3f * normal(rng);
  }
  HeadRun run(int64_t t0, int64_t n, float* out) {
    return {&rows[t0 * ld],
            &rows[t0 * ld + dk],
            &rows[t0 * ld + 2 * dk],
            ld,
            &decay[2 * t0],
            &beta[2 * t0],
            2,
            out + t0 * dv,
            dv,
            n};
  }
};

// max |a - b| over max |a|
float rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  float diff = 0.0f, scale = 0.0f;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(a[i]));
  }
  return diff / scale;
}

// Runs n tokens both ways (the chunked one in calls of `split` tokens) and compares.
void check(int64_t n, int64_t dk, int64_t dv, float min_decay, int64_t split = 0,
           int64_t chunk = Chunked::kDefaultChunk) {
  const std::string what = "n " + std::to_string(n) + ", dk " + std::to_string(dk) + ", dv " +
                           std::to_string(dv) + ", split " + std::to_string(split) + ", chunk " +
                           std::to_string(chunk);
  Inputs in(n, dk, dv, min_decay, uint32_t(n * 131 + dk * 7 + dv));
  std::vector<float> s_ref = in.state, s_chunk = in.state;
  std::vector<float> o_ref(n * dv), o_chunk(n * dv, NAN);
  recurrent(s_ref.data(), in.run(0, n, o_ref.data()), dk, dv);
  Chunked chunked(dk, dv, chunk);
  const int64_t step = split ? split : n;
  for (int64_t t0 = 0; t0 < n; t0 += step)
    chunked.run(s_chunk.data(), in.run(t0, std::min(step, n - t0), o_chunk.data()));
  EXPECT_LT(rel_diff(o_ref, o_chunk), 1e-4f) << "outputs, " << what;
  EXPECT_LT(rel_diff(s_ref, s_chunk), 1e-4f) << "state, " << what;
}

TEST(DeltaChunked, MatchesTheRecurrenceAcrossChunkBoundaries) {
  for (int64_t n : {1, 7, 63, 64, 65, 200, 513}) check(n, 128, 128, 0.85f);
}

TEST(DeltaChunked, RunsSplitAcrossCallsCarryTheState) {
  check(200, 128, 128, 0.85f, 100);  // a chunk boundary inside the second call
  check(150, 128, 128, 0.85f, 64);
}

TEST(DeltaChunked, OtherHeadSizesAndPartialTiles) {
  for (int64_t n : {5, 64, 97}) {
    check(n, 64, 96, 0.85f);
    check(n, 40, 24, 0.85f);
  }
}

TEST(DeltaChunked, OtherChunkSizes) {
  // ml_run --delta-chunk N: 1 (a chunk per token), odd sizes, up to a whole batch of 128
  for (int64_t chunk : {1, 7, 16, 64, 128}) {
    check(150, 128, 128, 0.85f, 0, chunk);
    check(150, 64, 96, 0.85f, 100, chunk);
  }
}

TEST(DeltaChunked, FastDecayUnderflowsCleanly) {
  // decays down to 1e-3: products over a chunk reach 0 in float without NaN or inf
  for (int64_t n : {64, 130}) check(n, 128, 128, 1e-3f);
}

}  // namespace
}  // namespace krafla::delta
