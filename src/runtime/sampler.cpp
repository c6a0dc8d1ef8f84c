#include "krafla/sampler.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {
namespace {

// A 128k–256k vocabulary makes anything O(n log n) per token cost milliseconds, more than the
// forward pass of a small model: every whole-vocabulary step here is a linear pass, and only
// the few candidates that survive a cheap cut are ever sorted.

constexpr int kLanes = 8;       // independent accumulators: lets the compiler vectorize a reduction
constexpr int kBlock = 256;     // dense draw: find the block by its sum, then the token inside it
constexpr int kHistShift = 20;  // top-p bins: a float's exponent and 3 mantissa bits, 8 per octave
constexpr int kBins = 1024;     // keys of floats in [0, 2)
constexpr int kHistWays = 4;    // interleaved histograms: fewer store-to-load stalls on one bin

// The higher logit, then the lower id: the order of top-k, greedy and the top-p prefix.
bool better(float a, int32_t ia, float b, int32_t ib) { return a > b || (a == b && ia < ib); }

// Whether any x[i] >= t or is NaN. An OR of compares vectorizes where a float max does not.
bool any_at_least_or_nan(const float* x, int n, float t) {
  int any = 0;
  for (int i = 0; i < n; ++i) any |= (x[i] >= t) | (x[i] != x[i]);
  return any != 0;
}

// The largest of non-negative floats, compared as integers (their bits order the same), which
// vectorizes where a float max reduction does not without -ffast-math.
float max_non_negative(const float* x, int n) {
  int32_t m = 0;
  for (int i = 0; i < n; ++i) m = std::max(m, std::bit_cast<int32_t>(x[i]));
  return std::bit_cast<float>(m);
}

// The sum of the x[i] >= lo. (Two accumulator arrays in one loop spill; one stays in registers.)
float sum_at_least(const float* x, int n, float lo) {
  float acc[kLanes] = {};
  int i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l] >= lo ? x[i + l] : 0.0f;
  for (; i < n; ++i) acc[0] += x[i] >= lo ? x[i] : 0.0f;
  float s = 0;
  for (float a : acc) s += a;
  return s;
}

// Appends {x[i], i} for every x[i] >= lo, testing blocks vectorized first: few pass, usually.
template <typename Cand>
void collect_at_least(const float* x, int n, float lo, std::vector<Cand>& out) {
  constexpr int kScan = 64;
  for (int b = 0; b < n; b += kScan) {
    const int e = std::min(n, b + kScan);
    if (!any_at_least_or_nan(x + b, e - b, lo)) continue;
    for (int i = b; i < e; ++i)
      if (x[i] >= lo) out.push_back({x[i], int32_t(i)});
  }
}

int hist_key(float p) { return std::min(int(std::bit_cast<uint32_t>(p) >> kHistShift), kBins - 1); }
float hist_floor(int key) { return std::bit_cast<float>(uint32_t(key) << kHistShift); }

[[noreturn]] void no_finite_maximum(const char* where) {
  throw Error(
      fmt::format("sampler: {}: the logits have no finite maximum (NaN, +inf, all -inf, "
                  "or too large for the temperature)",
                  where));
}

// Inverse CDF in order over weights w[0, n), counting only those >= lo (> 0): the index where
// r falls, or -1 when rounding left r past the end (then *last is the last one counted).
template <typename Weight>
int walk(const Weight* w, int n, double lo, double& r, int* last) {
  for (int i = 0; i < n; ++i) {
    const double x = double(w[i]);
    if (x >= lo && x > 0) {
      *last = i;
      if (r < x) return i;
      r -= x;
    }
  }
  return -1;
}

}  // namespace

Sampler::Sampler(const SamplerParams& p) : p_(p), rng_(p.seed) {}

void Sampler::collect_penalties(std::span<const float> logits, std::span<const int32_t> recent) {
  pen_.clear();
  if (p_.repeat_penalty == 1.0f || p_.repeat_last_n == 0) return;
  const size_t last =
      p_.repeat_last_n < 0 ? recent.size() : std::min(recent.size(), size_t(p_.repeat_last_n));
  for (int32_t id : recent.subspan(recent.size() - last))
    if (id >= 0 && size_t(id) < logits.size()) pen_.push_back({id, 0.0f});
  std::sort(pen_.begin(), pen_.end());
  pen_.erase(std::unique(pen_.begin(), pen_.end(),
                         [](const auto& a, const auto& b) { return a.first == b.first; }),
             pen_.end());
  for (auto& [id, l] : pen_) {
    l = logits[id];
    l = l > 0 ? l / p_.repeat_penalty : l * p_.repeat_penalty;
  }
}

bool Sampler::penalised(int32_t id) const {
  return std::binary_search(pen_.begin(), pen_.end(), std::pair{id, 0.0f},
                            [](const auto& a, const auto& b) { return a.first < b.first; });
}

// cand_ = the k best tokens by penalised logit, best first. The scan reads the logits as they
// are: it keeps k + |penalised| of them, which holds the k best unpenalised ones whatever the
// penalty did to the others, then the penalised ones join with their new logits.
void Sampler::select_top(std::span<const float> logits, size_t k) {
  const int n = int(logits.size());
  const int m = int(std::min(logits.size(), k + pen_.size()));
  // As a heap's "less", ranking first puts the worst kept token on top, where it is replaced.
  const auto ranks_first = [](const Cand& a, const Cand& b) {
    return better(a.key, a.id, b.key, b.id);
  };
  cand_.clear();
  for (int i = 0; i < m; ++i) {
    if (std::isnan(logits[i])) no_finite_maximum("top-k");
    cand_.push_back({logits[i], i});
  }
  std::make_heap(cand_.begin(), cand_.end(), ranks_first);
  // A later token with the same logit as the worst kept loses on its higher id: only '>' enters.
  constexpr int kScan = 64;
  for (int b = m; b < n; b += kScan) {
    const int e = std::min(n, b + kScan);
    // x > key  <=>  x >= the next float up (the exact test follows)
    if (!any_at_least_or_nan(&logits[b], e - b, std::nextafter(cand_.front().key, INFINITY)))
      continue;
    for (int i = b; i < e; ++i) {
      if (std::isnan(logits[i])) no_finite_maximum("top-k");
      if (logits[i] > cand_.front().key) {
        std::pop_heap(cand_.begin(), cand_.end(), ranks_first);
        cand_.back() = {logits[i], i};
        std::push_heap(cand_.begin(), cand_.end(), ranks_first);
      }
    }
  }
  if (!pen_.empty()) {
    std::erase_if(cand_, [&](const Cand& c) { return penalised(c.id); });
    for (const auto& [id, l] : pen_) {
      if (std::isnan(l)) no_finite_maximum("top-k");
      cand_.push_back({l, id});
    }
  }
  std::sort(cand_.begin(), cand_.end(), ranks_first);
  cand_.resize(std::min(cand_.size(), k));
}

Sampler::Form Sampler::prepare_top_k(std::span<const float> logits, size_t k) {
  select_top(logits, k);
  const double best = cand_[0].key;
  if (!std::isfinite(best)) no_finite_maximum("top-k");
  weight_.resize(cand_.size());
  double total = 0;
  for (size_t j = 0; j < cand_.size(); ++j)
    total += weight_[j] = std::exp((cand_[j].key - best) / p_.temperature);
  // Both cuts keep a prefix of the sorted candidates: keep the shorter one, never less than one.
  const double min_w = std::min(1.0f, p_.min_p);  // p(best) has weight 1
  const double target = double(p_.top_p) * total;
  size_t keep = 0;
  double acc = 0;
  while (keep < cand_.size() && weight_[keep] >= min_w && weight_[keep] > 0) {
    acc += weight_[keep++];
    if (p_.top_p < 1.0f && acc >= target) break;
  }
  keep = std::max<size_t>(keep, 1);
  cand_.resize(keep);
  weight_.resize(keep);
  total_ = 0;
  for (double w : weight_) total_ += w;
  return Form::List;
}

// top-p without top-k. Only the tokens of the one histogram bin (by float exponent) where the
// mass crosses top_p get sorted. Usually the nucleus lies within 2^-10 of the best token: then
// only those are collected and binned, which a vectorized pass over the mass tells beforehand.
void Sampler::nucleus(float min_keep) {
  const int n = int(prob_.size());
  const float near_lo = max_non_negative(prob_.data(), n) * (1.0f / 1024);
  double total = 0, near = 0;
  for (int i = 0; i < n; i += kBlock) {
    total += sum_at_least(&prob_[i], std::min(kBlock, n - i), 0.0f);
    near += sum_at_least(&prob_[i], std::min(kBlock, n - i), near_lo);
  }
  const double target = double(p_.top_p) * total;
  const float lo = near >= target ? near_lo : std::numeric_limits<float>::denorm_min();
  cand_.clear();
  collect_at_least(prob_.data(), n, lo, cand_);
  const size_t c = cand_.size();
  hist_.assign(size_t(kBins) * kHistWays, 0.0);
  size_t j = 0;
  for (; j + kHistWays <= c; j += kHistWays)
    for (int w = 0; w < kHistWays; ++w)
      hist_[w * kBins + hist_key(cand_[j + w].key)] += cand_[j + w].key;
  for (; j < c; ++j) hist_[hist_key(cand_[j].key)] += cand_[j].key;
  for (int w = 1; w < kHistWays; ++w)
    for (int b = 0; b < kBins; ++b) hist_[b] += hist_[w * kBins + b];
  // Every token left out is below every one collected, so the bins above the crossing one hold
  // the same mass as over the whole vocabulary.
  double above = 0;
  int cross = -1;
  for (int b = kBins - 1; b >= 0 && cross < 0; --b) {
    if (hist_[b] > 0 && above + hist_[b] >= target)
      cross = b;
    else
      above += hist_[b];
  }
  if (cross >= 0) {  // else rounding kept the sum of everything under target: keep everything
    const float cross_lo = hist_floor(cross), hi = hist_floor(cross + 1);
    std::erase_if(cand_, [&](const Cand& x) { return x.key < cross_lo; });
    const auto mid =
        std::partition(cand_.begin(), cand_.end(), [&](const Cand& x) { return x.key >= hi; });
    std::sort(mid, cand_.end(),
              [](const Cand& x, const Cand& y) { return better(x.key, x.id, y.key, y.id); });
    auto end = mid;
    while (end != cand_.end()) {
      above += (end++)->key;
      if (above >= target) break;
    }
    cand_.erase(end, cand_.end());
  }
  if (min_keep > 0) std::erase_if(cand_, [&](const Cand& x) { return x.key < min_keep; });
  weight_.resize(cand_.size());
  total_ = 0;
  for (size_t k = 0; k < cand_.size(); ++k) total_ += weight_[k] = cand_[k].key;
}

// No top-k: the whole vocabulary's softmax by the ISA's kernel, then the nucleus (top-p), or
// else the Dense form, drawn from by block sums and then one block: no sort at all.
Sampler::Form Sampler::prepare_dense(std::span<const float> logits) {
  const int n = int(logits.size());
  const float inv_t = 1.0f / p_.temperature;
  prob_.resize(n);
  // NaN is looked for here: the kernels' exp need not propagate it (a clamp can swallow it).
  int nan = 0;
  for (int i = 0; i < n; ++i) {
    prob_[i] = logits[i] * inv_t;
    nan |= prob_[i] != prob_[i];
  }
  if (nan) no_finite_maximum("softmax");
  for (const auto& [id, l] : pen_) prob_[id] = l * inv_t;
  const float sum = kernels::softmax(prob_.data(), n);  // >= 1 (the best has exp(0))
  if (!(sum >= 1.0f) || !std::isfinite(sum)) no_finite_maximum("softmax");
  // p(best) read back rather than taken as 1 / sum, so min_p = 1 keeps the best token whatever
  // rounding the kernel's normalisation does.
  const float min_keep =
      p_.min_p > 0 ? std::min(1.0f, p_.min_p) * max_non_negative(prob_.data(), n) : 0.0f;
  if (p_.top_p < 1.0f) {
    nucleus(min_keep);
    return Form::List;
  }
  dense_min_ = std::max(min_keep, std::numeric_limits<float>::denorm_min());
  block_sum_.resize((n + kBlock - 1) / kBlock);
  total_ = 0;
  for (size_t b = 0; b < block_sum_.size(); ++b) {
    const int i = int(b) * kBlock;
    total_ += block_sum_[b] = sum_at_least(&prob_[i], std::min(kBlock, n - i), dense_min_);
  }
  return Form::Dense;
}

Sampler::Form Sampler::prepare(std::span<const float> logits, std::span<const int32_t> recent) {
  if (logits.empty()) throw Error("sampler: empty logits");
  collect_penalties(logits, recent);
  if (p_.temperature <= 0.0f || !std::isfinite(1.0f / p_.temperature)) {
    select_top(logits, 1);
    greedy_ = cand_[0].id;
    return Form::Greedy;
  }
  if (p_.top_k > 0 && size_t(p_.top_k) < logits.size())
    return prepare_top_k(logits, size_t(p_.top_k));
  return prepare_dense(logits);
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> recent) {
  const Form form = prepare(logits, recent);
  if (form == Form::Greedy) return greedy_;
  double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * total_;
  int last = -1;
  if (form == Form::List) {
    const int j = walk(weight_.data(), int(weight_.size()), 0.0, r, &last);
    return cand_[j >= 0 ? j : std::max(last, 0)].id;
  }
  // Dense: the block by its sum, then the token inside it.
  const int n = int(prob_.size());
  size_t b = 0;
  for (; b + 1 < block_sum_.size() && r >= block_sum_[b]; ++b) r -= block_sum_[b];
  const int i0 = int(b) * kBlock;
  const int j = walk(&prob_[i0], std::min(kBlock, n - i0), dense_min_, r, &last);
  if (j >= 0 || last >= 0) return i0 + (j >= 0 ? j : last);
  // Rounding walked r into a block with nothing drawable: the last drawable token before it.
  for (int i = i0 - 1; i >= 0; --i)
    if (prob_[i] >= dense_min_) return i;
  return i0;  // unreachable: the best token is always drawable
}

std::vector<TokenProb> Sampler::probabilities(std::span<const float> logits,
                                              std::span<const int32_t> recent) {
  const Form form = prepare(logits, recent);
  std::vector<TokenProb> out;
  if (form == Form::Greedy) return {{greedy_, 1.0}};
  if (form == Form::List) {
    for (size_t j = 0; j < cand_.size(); ++j)
      if (weight_[j] > 0) out.push_back({cand_[j].id, weight_[j] / total_});
    std::sort(out.begin(), out.end(),
              [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
  } else {
    for (size_t i = 0; i < prob_.size(); ++i)
      if (prob_[i] >= dense_min_) out.push_back({int32_t(i), prob_[i] / total_});
  }
  return out;
}

namespace {

// walk() over all of w: the index where r falls, the last one with weight when rounding ran r
// past the end.
size_t pick(const std::vector<double>& w, double r) {
  int last = 0;
  const int j = walk(w.data(), int(w.size()), 0.0, r, &last);
  return size_t(j >= 0 ? j : last);
}

}  // namespace

int32_t Sampler::sample_draft(std::span<const float> logits, std::span<const int32_t> recent,
                              int32_t draft, std::span<const TokenProb> q) {
  if (p_.temperature <= 0) return sample(logits, recent);
  const std::vector<TokenProb> p = probabilities(logits, recent);
  const auto prob = [](std::span<const TokenProb> d, int32_t id) {
    const auto it = std::lower_bound(d.begin(), d.end(), id,
                                     [](const TokenProb& t, int32_t v) { return t.id < v; });
    return it != d.end() && it->id == id ? it->p : 0.0;
  };
  const double px = prob(p, draft), qx = prob(q, draft);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  if (qx > 0 && u(rng_) * qx < px) return draft;
  // Rejected (p(draft) < q(draft)): the residual max(0, p - q), by inverse CDF.
  std::vector<double> rest(p.size());
  double total = 0;
  for (size_t i = 0; i < p.size(); ++i) total += rest[i] = std::max(0.0, p[i].p - prob(q, p[i].id));
  if (!(total > 0)) {  // p == q up to rounding: p itself
    for (size_t i = 0; i < p.size(); ++i) total += rest[i] = p[i].p;
  }
  return p[pick(rest, u(rng_) * total)].id;
}

int32_t Sampler::draw(std::span<const TokenProb> d) {
  if (d.empty()) throw Error("Sampler::draw: an empty distribution");
  if (d.size() == 1) return d[0].id;
  std::vector<double> w(d.size());
  double total = 0;
  for (size_t i = 0; i < d.size(); ++i) total += w[i] = d[i].p;
  return d[pick(w, std::uniform_real_distribution<double>(0.0, 1.0)(rng_) * total)].id;
}

}  // namespace krafla
