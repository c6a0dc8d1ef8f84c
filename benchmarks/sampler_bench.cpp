// Sampler::sample on a Qwen-sized vocabulary (151936 entries), one call per iteration.
// The logits imitate a language model's: a Gaussian bulk (sd 2) with a long tail (10000 tokens
// lifted by an exponential of mean 1.5), which gives (with libstdc++'s distributions) the best
// token p = 0.275, a top-p 0.95 nucleus of 15 tokens and 5 tokens above min-p 0.05 at
// temperature 1. The "flat" case drops the tail: best p = 0.011, a 0.95 nucleus of 55171
// tokens (36% of the vocabulary), top-p's worst case.
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "krafla/sampler.h"

namespace krafla {
namespace {

constexpr int kVocab = 151936;

std::vector<float> model_like_logits(bool tail) {
  std::mt19937 rng(1234);
  std::normal_distribution<float> bulk(0.0f, 2.0f);
  std::exponential_distribution<float> lift(1.0f / 1.5f);
  std::uniform_int_distribution<int> pick(0, kVocab - 1);
  std::vector<float> l(kVocab);
  for (auto& x : l) x = bulk(rng);
  if (tail)
    for (int i = 0; i < 10000; ++i) l[pick(rng)] += lift(rng);
  return l;
}

SamplerParams params(float temp, int top_k, float top_p, float min_p, float penalty) {
  SamplerParams p;
  p.temperature = temp;
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = penalty;
  p.repeat_last_n = 64;
  return p;
}

void bm_sample(benchmark::State& state, SamplerParams p, bool tail) {
  const std::vector<float> logits = model_like_logits(tail);
  // 64 recent tokens spread over the vocabulary (only read when the penalty is on).
  std::vector<int32_t> recent(64);
  for (int i = 0; i < 64; ++i) recent[i] = int32_t((i * 2371) % kVocab);
  Sampler s(p);
  for (auto _ : state) benchmark::DoNotOptimize(s.sample(logits, recent));
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK_CAPTURE(bm_sample, greedy, params(0, 0, 1, 0, 1), true);
BENCHMARK_CAPTURE(bm_sample, temp1_no_truncation, params(1, 0, 1, 0, 1), true);
BENCHMARK_CAPTURE(bm_sample, top_k40, params(1, 40, 1, 0, 1), true);
BENCHMARK_CAPTURE(bm_sample, top_p095, params(1, 0, 0.95f, 0, 1), true);
BENCHMARK_CAPTURE(bm_sample, top_p09_top_k40, params(1, 40, 0.9f, 0, 1), true);
BENCHMARK_CAPTURE(bm_sample, min_p005, params(1, 0, 1, 0.05f, 1), true);
BENCHMARK_CAPTURE(bm_sample, penalty11_temp1, params(1, 0, 1, 0, 1.1f), true);
BENCHMARK_CAPTURE(bm_sample, penalty11_defaults, params(0.8f, 40, 0.95f, 0, 1.1f), true);
BENCHMARK_CAPTURE(bm_sample, flat_top_p095, params(1, 0, 0.95f, 0, 1), false);

}  // namespace
}  // namespace krafla
