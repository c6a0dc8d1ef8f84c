#include "krafla/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_set>

namespace krafla {

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
  const int n = int(logits.size());
  cand_.resize(n);
  for (int i = 0; i < n; ++i) cand_[i] = {logits[i], i};
  if (p_.repeat_penalty != 1.0f && p_.repeat_last_n != 0) {
    const size_t last = p_.repeat_last_n < 0 ? recent.size()
                                             : std::min(recent.size(), size_t(p_.repeat_last_n));
    std::unordered_set<int32_t> seen(recent.end() - last, recent.end());
    for (int32_t id : seen) {
      if (id < 0 || id >= n) continue;
      float& l = cand_[id].first;
      l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
    }
  }
  const auto by_logit = [](const auto& a, const auto& b) {
    return a.first > b.first || (a.first == b.first && a.second < b.second);
  };
  if (p_.temperature <= 0.0f) return std::min_element(cand_.begin(), cand_.end(), by_logit)->second;

  size_t k = p_.top_k > 0 ? std::min<size_t>(p_.top_k, n) : size_t(n);
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), by_logit);
  cand_.resize(k);
  const float mx = cand_[0].first;
  double sum = 0;
  for (auto& c : cand_) {
    c.first = std::exp((c.first - mx) / p_.temperature);
    sum += c.first;
  }
  if (p_.top_p < 1.0f) {
    double acc = 0;
    size_t keep = 0;
    while (keep < cand_.size()) {
      acc += cand_[keep++].first / sum;
      if (acc >= p_.top_p) break;
    }
    cand_.resize(keep);
    sum = 0;
    for (auto& c : cand_) sum += c.first;
  }
  std::uniform_real_distribution<double> u(0.0, sum);
  double r = u(rng_);
  for (auto& c : cand_) {
    r -= c.first;
    if (r <= 0) return c.second;
  }
  return cand_.back().second;
}

}  // namespace krafla
