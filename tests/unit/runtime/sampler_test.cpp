#include "krafla/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "krafla/error.h"

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

SamplerParams with(float temp, int top_k, float top_p, float min_p, float penalty = 1) {
  SamplerParams p = plain(temp);
  p.top_k = top_k;
  p.top_p = top_p;
  p.min_p = min_p;
  p.repeat_penalty = penalty;
  return p;
}

// The textbook definition, in double precision, by a full sort: penalty, temperature, top-k,
// then top-p and min-p on the top-k distribution (a token must pass both), renormalised.
std::vector<TokenProb> reference(const std::vector<float>& logits,
                                 const std::vector<int32_t>& recent, const SamplerParams& sp) {
  const int n = int(logits.size());
  std::vector<double> l(logits.begin(), logits.end());
  if (sp.repeat_penalty != 1 && sp.repeat_last_n != 0) {
    const size_t last =
        sp.repeat_last_n < 0 ? recent.size() : std::min(recent.size(), size_t(sp.repeat_last_n));
    for (int32_t id : std::set<int32_t>(recent.end() - last, recent.end()))
      if (id >= 0 && id < n) {
        const float f = logits[id];  // the penalty is applied to the float logit, in float
        l[id] = f > 0 ? f / sp.repeat_penalty : f * sp.repeat_penalty;
      }
  }
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return l[a] > l[b]; });
  if (sp.temperature <= 0) return {{order[0], 1.0}};
  const size_t k = sp.top_k > 0 ? std::min<size_t>(sp.top_k, n) : size_t(n);
  std::vector<double> p(k);
  double sum = 0;
  for (size_t j = 0; j < k; ++j)
    sum += p[j] = std::exp((l[order[j]] - l[order[0]]) / sp.temperature);
  for (auto& x : p) x /= sum;
  size_t keep_p = k;
  if (sp.top_p < 1) {
    double cum = 0;
    for (size_t j = 0; j < k; ++j)
      if ((cum += p[j]) >= sp.top_p) {
        keep_p = j + 1;
        break;
      }
  }
  size_t keep_m = 0;
  while (keep_m < k && p[keep_m] >= double(sp.min_p) * p[0]) ++keep_m;
  std::vector<TokenProb> out;
  double kept = 0;
  for (size_t j = 0; j < std::min(keep_p, keep_m); ++j)
    if (p[j] > 0) {
      out.push_back({order[j], p[j]});
      kept += p[j];
    }
  for (auto& t : out) t.p /= kept;
  std::sort(out.begin(), out.end(),
            [](const TokenProb& a, const TokenProb& b) { return a.id < b.id; });
  return out;
}

std::string describe(const SamplerParams& p) {
  return "temp " + std::to_string(p.temperature) + " top_k " + std::to_string(p.top_k) + " top_p " +
         std::to_string(p.top_p) + " min_p " + std::to_string(p.min_p) + " penalty " +
         std::to_string(p.repeat_penalty);
}

// The same tokens with the same probabilities (float softmax against double: relative 1e-5).
void expect_same_distribution(const std::vector<TokenProb>& got, const std::vector<TokenProb>& want,
                              const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].id, want[i].id) << what << " entry " << i;
    EXPECT_NEAR(got[i].p, want[i].p, 1e-5 * want[i].p + 1e-12) << what << " id " << got[i].id;
  }
}

// Pearson's chi-square of `draws` samples against `want`, expected counts below 5 pooled. The
// bound is df + 6 sqrt(2 df) + 6, far in the tail (the seed is fixed, so it is reproducible).
void expect_draws_follow(Sampler& s, const std::vector<float>& logits,
                         const std::vector<int32_t>& recent, const std::vector<TokenProb>& want,
                         int draws, const std::string& what) {
  std::map<int32_t, int> count;
  for (int i = 0; i < draws; ++i) ++count[s.sample(logits, recent)];
  std::map<int32_t, double> expected;
  for (const auto& t : want) expected[t.id] = t.p * draws;
  for (const auto& [id, c] : count) ASSERT_TRUE(expected.count(id)) << what << ": drew id " << id;
  double chi2 = 0, pooled_e = 0, pooled_o = 0;
  int bins = 0;
  for (const auto& [id, e] : expected) {
    const double o = count.count(id) ? count[id] : 0;
    if (e < 5) {
      pooled_e += e;
      pooled_o += o;
      continue;
    }
    chi2 += (o - e) * (o - e) / e;
    ++bins;
  }
  if (pooled_e > 0) {
    chi2 += (pooled_o - pooled_e) * (pooled_o - pooled_e) / std::max(pooled_e, 1.0);
    ++bins;
  }
  const double df = std::max(bins - 1, 1);
  EXPECT_LT(chi2, df + 6 * std::sqrt(2 * df) + 6) << what << " (" << bins << " bins)";
}

// Logits like a language model's: a Gaussian bulk and a long tail of lifted tokens.
std::vector<float> model_like(int n, uint32_t seed, int lifted) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> bulk(0.0f, 2.0f);
  std::exponential_distribution<float> lift(0.4f);
  std::vector<float> l(n);
  for (auto& x : l) x = bulk(rng);
  for (int i = 0; i < lifted; ++i) l[rng() % n] += lift(rng);
  return l;
}

const std::vector<SamplerParams>& configs() {
  static const std::vector<SamplerParams> c = {
      with(1, 0, 1, 0),           with(0.7f, 0, 1, 0),        with(1, 5, 1, 0),
      with(1.5f, 40, 1, 0),       with(1, 0, 0.9f, 0),        with(1.3f, 0, 0.5f, 0),
      with(1, 0, 1, 0.1f),        with(0.8f, 0, 1, 0.02f),    with(1, 10, 0.8f, 0),
      with(1, 10, 1, 0.2f),       with(0.8f, 0, 0.9f, 0.05f), with(1, 20, 0.95f, 0.02f),
      with(1, 0, 0.95f, 0, 1.3f), with(1, 8, 1, 0, 0.7f),     with(1, 0, 1, 0.05f, 1.5f),
  };
  return c;
}

void check_against_reference(const std::vector<float>& logits, const std::vector<int32_t>& recent,
                             int draws) {
  for (const SamplerParams& sp : configs()) {
    Sampler s(sp);
    const auto want = reference(logits, recent, sp);
    expect_same_distribution(s.probabilities(logits, recent), want, describe(sp));
    if (draws > 0) expect_draws_follow(s, logits, recent, want, draws, describe(sp));
  }
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

TEST(Sampler, SmallVocabularyMatchesTheDefinition) {
  const std::vector<float> l = model_like(50, 1, 10);
  const std::vector<int32_t> recent = {3, 7, 7, 49, 12, 0, 3};
  check_against_reference(l, recent, 20000);
}

// Several dense blocks and enough tokens for top-p's histogram to have many bins.
TEST(Sampler, MidVocabularyMatchesTheDefinition) {
  const std::vector<float> l = model_like(3000, 2, 150);
  std::vector<int32_t> recent;
  for (int i = 0; i < 80; ++i) recent.push_back((i * 37) % 3000);
  check_against_reference(l, recent, 10000);
}

// A 151936-entry vocabulary: the probabilities only (drawing would be slow in a unit test).
TEST(Sampler, LargeVocabularyMatchesTheDefinition) {
  const std::vector<float> l = model_like(151936, 3, 5000);
  std::vector<int32_t> recent;
  for (int i = 0; i < 64; ++i) recent.push_back((i * 2371) % 151936);
  for (const SamplerParams& sp :
       {with(1, 0, 1, 0), with(1, 0, 0.95f, 0), with(1, 0, 1, 0.05f), with(1, 40, 0.9f, 0),
        with(0.8f, 40, 0.95f, 0, 1.1f), with(1.2f, 0, 0.9f, 0.01f, 1.1f)}) {
    Sampler s(sp);
    expect_same_distribution(s.probabilities(l, recent), reference(l, recent, sp), describe(sp));
  }
}

// Most of the mass far below the best token (e^-8 each, 10000 tied): top-p cannot settle among
// the tokens near the best, and its boundary falls inside a run of ties, broken by lower id.
TEST(Sampler, TopPBoundaryInsideTiesFarBelowTheBest) {
  std::vector<float> l(10001, 0.0f);
  l[5000] = 8.0f;
  const SamplerParams sp = with(1, 0, 0.95f, 0);
  Sampler s(sp);
  const auto got = s.probabilities(l, {});
  const auto want = reference(l, {}, sp);
  expect_same_distribution(got, want, "ties");
  // e^8 + j >= 0.95 (e^8 + 10000): j = 9351 of the tied tokens, the lowest ids.
  ASSERT_EQ(got.size(), 9352u);
  EXPECT_EQ(got[9350].id, 9350);
  EXPECT_EQ(got[9351].id, 9351);  // 5000 is among them, so ids 0..9351
  // Each tied token is too unlikely for a chi-square: the draws stay in the nucleus and the
  // best is drawn as often as its probability says (6 binomial sd).
  const int n = 2000;
  int best = 0;
  for (int i = 0; i < n; ++i) {
    const int32_t id = s.sample(l, {});
    ASSERT_LE(id, 9351);
    best += id == 5000;
  }
  const double pb = std::exp(8.0) / (std::exp(8.0) + 9351);
  EXPECT_NEAR(best, pb * n, 6 * std::sqrt(n * pb * (1 - pb)));
}

TEST(Sampler, AllLogitsEqual) {
  const std::vector<float> l(7, 0.25f);
  const auto ids = [](const std::vector<TokenProb>& d) {
    std::vector<int32_t> v;
    for (const auto& t : d) v.push_back(t.id);
    return v;
  };
  EXPECT_EQ(Sampler(plain(0)).sample(l, {}), 0);  // the lowest id among equals
  expect_same_distribution(Sampler(plain(1)).probabilities(l, {}), reference(l, {}, plain(1)),
                           "none");
  EXPECT_EQ(ids(Sampler(with(1, 3, 1, 0)).probabilities(l, {})), (std::vector<int32_t>{0, 1, 2}));
  // 4/7 is the first prefix mass >= 0.5.
  EXPECT_EQ(ids(Sampler(with(1, 0, 0.5f, 0)).probabilities(l, {})),
            (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(Sampler(with(1, 0, 1, 1.0f)).probabilities(l, {}).size(), 7u);
  for (const auto& sp : configs()) {
    Sampler s(sp);
    expect_same_distribution(s.probabilities(l, {}), reference(l, {}, sp), describe(sp));
  }
}

TEST(Sampler, MinusInfinityIsNeverDrawn) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> l = {-inf, 1.0f, -inf, 0.0f, -inf};
  for (const auto& sp : {plain(1), with(1, 3, 1, 0), with(1, 4, 0.99f, 0), with(1, 0, 0.99f, 0),
                         with(1, 0, 1, 0.01f)}) {
    Sampler s(sp);
    const auto got = s.probabilities(l, {});
    expect_same_distribution(got, reference(l, {}, sp), describe(sp));
    ASSERT_EQ(got.size(), 2u) << describe(sp);
    for (int i = 0; i < 2000; ++i) {
      const int32_t id = s.sample(l, {});
      ASSERT_TRUE(id == 1 || id == 3) << describe(sp) << " drew " << id;
    }
  }
  EXPECT_EQ(Sampler(plain(0)).sample(l, {}), 1);
}

TEST(Sampler, NoFiniteLogitIsAnError) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> all_minus(4, -inf);
  std::vector<float> with_nan = model_like(1000, 5, 50);
  with_nan[700] = std::nanf("");  // past the first top-k candidates: found by the scan
  for (const auto& sp : {plain(1), with(1, 2, 1, 0), with(1, 0, 0.9f, 0), with(1, 0, 1, 0.1f)}) {
    Sampler s(sp);
    EXPECT_THROW(s.sample(all_minus, {}), Error) << describe(sp);
    EXPECT_THROW(s.sample(with_nan, {}), Error) << describe(sp);
  }
  EXPECT_THROW(Sampler(plain(0)).sample(with_nan, {}), Error);
  EXPECT_THROW(Sampler(plain(1)).sample({}, {}), Error);
}

TEST(Sampler, TinyTopPKeepsOnlyTheBest) {
  const std::vector<float> l = {2.0f, 5.0f, 5.0f, 1.0f};  // a tie at the top: the lower id wins
  for (const auto& sp : {with(1, 0, 1e-6f, 0), with(1, 3, 1e-6f, 0), with(1, 0, 0.0f, 0)}) {
    const auto got = Sampler(sp).probabilities(l, {});
    ASSERT_EQ(got.size(), 1u) << describe(sp);
    EXPECT_EQ(got[0].id, 1);
    EXPECT_EQ(got[0].p, 1.0);
  }
}

TEST(Sampler, MinPOneKeepsTheTokensTiedWithTheBest) {
  const std::vector<float> l = {5.0f, 5.0f, 2.0f, 4.999f};
  for (const auto& sp : {with(1, 0, 1, 1.0f), with(0.5f, 3, 1, 1.0f), with(1, 0, 0.99f, 1.0f)}) {
    const auto got = Sampler(sp).probabilities(l, {});
    ASSERT_EQ(got.size(), 2u) << describe(sp);
    EXPECT_EQ(got[0].id, 0);
    EXPECT_EQ(got[1].id, 1);
    EXPECT_DOUBLE_EQ(got[0].p, 0.5);
  }
}

TEST(Sampler, TopKLargerThanTheVocabularyIsNoTopK) {
  const std::vector<float> l = model_like(30, 4, 5);
  const auto all = Sampler(plain(1)).probabilities(l, {});
  ASSERT_EQ(all.size(), 30u);
  expect_same_distribution(Sampler(with(1, 100, 1, 0)).probabilities(l, {}), all, "k 100");
  expect_same_distribution(Sampler(with(1, 30, 1, 0)).probabilities(l, {}), all, "k 30");
}

TEST(Sampler, VocabularyOfOne) {
  const std::vector<float> l = {-3.0f};
  const std::vector<int32_t> recent = {0, 0};
  for (auto sp : configs()) {
    Sampler s(sp);
    for (int i = 0; i < 10; ++i) EXPECT_EQ(s.sample(l, recent), 0) << describe(sp);
    const auto got = s.probabilities(l, recent);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].p, 1.0);
  }
  EXPECT_EQ(Sampler(plain(0)).sample(l, recent), 0);
}

// A penalty below 1 raises a token: it must be able to enter the top-k from outside it.
TEST(Sampler, PenaltyMovesTokensAcrossTheTopKBoundary) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f, 2.5f};
  const std::vector<int32_t> recent = {0, 1};
  const SamplerParams up = with(1, 2, 1, 0, 0.25f);  // 1 / 0.25 = 4 and 3 / 0.25 = 12
  const auto raised = Sampler(up).probabilities(l, recent);
  expect_same_distribution(raised, reference(l, recent, up), "up");
  ASSERT_EQ(raised.size(), 2u);
  EXPECT_EQ(raised[0].id, 0);  // from third-last into the top 2
  EXPECT_EQ(raised[1].id, 1);
  const SamplerParams down = with(1, 2, 1, 0, 4.0f);  // 3 / 4 = 0.75: token 1 drops out
  const auto lowered = Sampler(down).probabilities(l, recent);
  expect_same_distribution(lowered, reference(l, recent, down), "down");
  ASSERT_EQ(lowered.size(), 2u);
  EXPECT_EQ(lowered[0].id, 2);
  EXPECT_EQ(lowered[1].id, 4);
}

namespace {
// Speculative sampling (Sampler::sample_draft): whatever distribution q the draft comes from,
// the token returned is distributed as the textbook p, and the draft is kept with probability
// sum_x min(p(x), q(x)) (Leviathan et al. 2023, theorem 3.5).
void check_draft_rule(const SamplerParams& sp, const std::vector<float>& l,
                      const std::vector<TokenProb>& q) {
  const std::vector<TokenProb> p = reference(l, {}, sp);
  Sampler s(sp), drafter(plain(1.0f));
  std::map<int32_t, int> count;
  int kept = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    const int32_t x = drafter.draw(q);
    const int32_t id = s.sample_draft(l, {}, x, q);
    ++count[id];
    kept += id == x;
  }
  double want_kept = 0;
  for (const TokenProb& t : p) {
    // Binomial sd <= sqrt(n/4) ≈ 224: a 6 sd bound.
    EXPECT_NEAR(count[t.id], t.p * n, 1350) << "token " << t.id;
    count.erase(t.id);
    for (const TokenProb& u : q)
      if (u.id == t.id) want_kept += std::min(t.p, u.p);
  }
  EXPECT_TRUE(count.empty()) << "a token outside p was returned: " << count.begin()->first;
  EXPECT_NEAR(kept, want_kept * n, 1350);
}
}  // namespace

TEST(SampleDraft, KeepsThePlainDistribution) {
  const std::vector<float> l = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f, 1.7f, 0.0f, 2.2f};
  // q over tokens p does not hold (top-k 5 leaves out 0, 2, 4, 6) and missing some it does
  check_draft_rule(with(0.9f, 5, 1.0f, 0.0f), l,
                   {{0, 0.3}, {1, 0.1}, {2, 0.2}, {5, 0.25}, {7, 0.15}});
  // the whole vocabulary, and a q close to p
  check_draft_rule(plain(1.0f), l, reference(l, {}, plain(1.2f)));
  // top-p and min-p on top of top-k
  check_draft_rule(with(0.7f, 6, 0.9f, 0.05f), l, {{1, 0.5}, {3, 0.5}});
}

TEST(SampleDraft, DraftFromPItselfIsAlwaysKept) {
  const std::vector<float> l = {1.0f, 2.5f, 0.3f, 2.0f, -1.0f};
  const SamplerParams sp = with(0.8f, 4, 0.95f, 0.0f);
  Sampler s(sp), drafter(plain(1.0f));
  const std::vector<TokenProb> q = s.probabilities(l, {});
  for (int i = 0; i < 1000; ++i) {
    const int32_t x = drafter.draw(q);
    ASSERT_EQ(s.sample_draft(l, {}, x, q), x);
  }
}

TEST(SampleDraft, GreedyIsTheArgmaxWhateverTheDraft) {
  const std::vector<float> l = {1.0f, 2.5f, 0.3f, 2.0f};
  Sampler s(plain(0.0f));
  for (int32_t x = 0; x < 4; ++x) {
    EXPECT_EQ(s.sample_draft(l, {}, x, std::vector<TokenProb>{{x, 1.0}}), 1);
    EXPECT_EQ(s.sample_draft(l, {}, x, std::vector<TokenProb>{{0, 0.5}, {x, 0.5}}), 1);
  }
}

TEST(SamplerDraw, FollowsTheDistribution) {
  Sampler s(plain(1.0f));
  const std::vector<TokenProb> d = {{3, 0.1}, {7, 0.6}, {9, 0.3}};
  std::map<int32_t, int> count;
  const int n = 100000;
  for (int i = 0; i < n; ++i) ++count[s.draw(d)];
  ASSERT_EQ(count.size(), 3u);
  for (const TokenProb& t : d) EXPECT_NEAR(count[t.id], t.p * n, 950);  // 6 sd: (n/4)^0.5
  EXPECT_EQ(s.draw(std::vector<TokenProb>{{5, 1.0}}), 5);
  EXPECT_THROW(s.draw(std::vector<TokenProb>{}), Error);
}

}  // namespace krafla
