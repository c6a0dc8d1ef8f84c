// Session reuse on real (random-weight) model files made by the e2e setup fixture: a prompt
// that continues the cached history reuses it, one that diverges recomputes, and either way the
// logits are bit-identical to a fresh session's. Qwen3.5's DeltaNet state cannot be cut back,
// so only a whole-history continuation is reused there; attention-only models keep any shared
// prefix.
#include "krafla/session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <numeric>
#include <utility>
#include <vector>

#include "krafla/error.h"
#include "krafla/generate.h"
#include "krafla/model.h"
#include "krafla/sampler.h"

namespace krafla {
namespace {

const SessionOptions kOptions{.n_threads = 2, .n_ctx = 512};

std::unique_ptr<Model> load_if_built(const std::string& name) {
  const std::string path = std::string(KRAFLA_E2E_DIR) + "/" + name;
  if (!std::filesystem::exists(path)) return nullptr;
  return Model::load(path, 2);
}

std::vector<int32_t> prompt(int n, int salt, int vocab) {
  std::vector<int32_t> ids(n);
  for (int i = 0; i < n; ++i) ids[i] = (i * 7919 + salt * 104729 + 13) % std::min(vocab, 4000);
  return ids;
}

// Two prompts that share their first 60 tokens, then differ.
std::pair<std::vector<int32_t>, std::vector<int32_t>> diverging(int n_first, int n_other, int salt,
                                                                int vocab) {
  std::vector<int32_t> first = prompt(n_first, salt, vocab), other = prompt(n_other, salt, vocab);
  other[60] = (other[60] + 1) % vocab;
  return {first, other};
}

std::vector<float> fresh_logits(const Model& m, const std::vector<int32_t>& ids) {
  Session s(m, kOptions);
  s.eval(ids);
  return s.logits();
}

// Declares m, the model file `name`, or skips the test when the setup fixture has not made it.
#define LOAD_OR_SKIP(m, name)   \
  auto m = load_if_built(name); \
  if (!(m)) GTEST_SKIP() << name << " not built (run the e2e setup fixture first)"

// Evaluates `first` in s, then `next` after keeping what reuse_prefix allows: checks that it
// kept `kept` tokens and that the logits equal a fresh session's on `next`.
void expect_reuse(Session& s, const Model& m, const std::vector<int32_t>& first,
                  const std::vector<int32_t>& next, int kept) {
  s.eval(first);
  EXPECT_EQ(s.reuse_prefix(next), kept);
  EXPECT_EQ(s.n_past(), kept);
  s.eval(std::span<const int32_t>(next).subspan(size_t(kept)));
  EXPECT_EQ(s.logits(), fresh_logits(m, next));
}

TEST(SessionReuse, DeltaNetContinuationReusesTheState) {
  LOAD_OR_SKIP(m, "qwen35-long-q8_0.mlb");
  const int V = m->config().n_vocab;
  std::vector<int32_t> first = prompt(100, 1, V), more = prompt(150, 1, V);
  more.erase(more.begin(), more.begin() + 100);
  std::vector<int32_t> all = first;
  all.insert(all.end(), more.begin(), more.end());

  Session s(*m, kOptions);
  expect_reuse(s, *m, first, all, 100);
}

TEST(SessionReuse, DeltaNetDivergingPromptRecomputes) {
  LOAD_OR_SKIP(m, "qwen35-long-q8_0.mlb");
  const auto [first, other] = diverging(100, 140, 2, m->config().n_vocab);
  Session s(*m, kOptions);
  expect_reuse(s, *m, first, other, 0);
  // The same prompt again has no new token to refresh the logits with: recompute too.
  EXPECT_EQ(s.reuse_prefix(other), 0);
  s.eval(other);
  EXPECT_EQ(s.logits(), fresh_logits(*m, other));
}

TEST(SessionReuse, DeltaNetStateCannotBeCutBack) {
  LOAD_OR_SKIP(m, "qwen35-long-q8_0.mlb");
  const std::vector<int32_t> ids = prompt(50, 3, m->config().n_vocab);
  Session s(*m, kOptions);
  s.eval(ids);
  EXPECT_THROW(s.truncate(20), Error);
  EXPECT_EQ(s.n_past(), 50);
  s.truncate(0);  // a restart clears the recurrent and conv state
  s.eval(ids);
  EXPECT_EQ(s.logits(), fresh_logits(*m, ids));
}

TEST(SessionReuse, AttentionModelKeepsTheSharedPrefix) {
  LOAD_OR_SKIP(m, "llama-q8_0.mlb");
  const auto [first, other] = diverging(80, 120, 4, m->config().n_vocab);
  Session s(*m, kOptions);
  expect_reuse(s, *m, first, other, 60);
  EXPECT_EQ(s.reuse_prefix(other), 119);  // identical prompt: the last token is re-evaluated
}

// Several sequences evaluated together (ml_server's slots): prompts of different lengths packed
// into shared forward steps (a small n_batch splits them across steps), then decode steps of
// one token per sequence. Every sequence's logits must equal, bit for bit, a session that ran
// it alone.
void expect_batch_equals_alone(const Model& m) {
  const int V = m.config().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {prompt(5, 11, V), prompt(150, 12, V),
                                                     prompt(1, 13, V), prompt(70, 14, V)};
  SessionOptions o = kOptions;
  o.n_batch = 32;
  o.n_seqs = int(prompts.size());
  Session batch(m, o);
  std::vector<std::unique_ptr<Session>> alone;
  std::vector<SeqTokens> work;
  for (size_t i = 0; i < prompts.size(); ++i) {
    alone.push_back(std::make_unique<Session>(m, kOptions));
    alone.back()->eval(prompts[i]);
    work.push_back({int(i), prompts[i]});
  }
  batch.eval_batch(work);
  for (int step = 0; step < 4; ++step) {
    std::vector<int32_t> next(prompts.size());
    work.clear();
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(batch.logits(int(i)), alone[i]->logits()) << "sequence " << i << " step " << step;
      ASSERT_EQ(batch.history(int(i)), alone[i]->history());
      next[i] = (step * 31 + int(i) * 7 + 1) % V;
      alone[i]->eval(std::span<const int32_t>(&next[i], 1));
      // Sequence 2 sits out step 1's batch and runs alone after it: the others must not care.
      if (!(i == 2 && step == 1)) work.push_back({int(i), std::span<const int32_t>(&next[i], 1)});
    }
    batch.eval_batch(work);
    if (step == 1)
      batch.eval_batch(std::vector<SeqTokens>{{2, std::span<const int32_t>(&next[2], 1)}});
  }
  // Every row's logits for some sequences (speculative drafts in ml_server), the last row's
  // for the others, in steps that span several forward passes: as eval() alone gives them.
  const std::vector<std::vector<int32_t>> more = {prompt(3, 21, V), prompt(40, 22, V),
                                                  prompt(2, 23, V), prompt(9, 24, V)};
  std::vector<std::vector<float>> rows(more.size()), want(more.size());
  work.clear();
  for (size_t i = 0; i < more.size(); ++i) {
    alone[i]->eval(more[i], &want[i]);
    work.push_back({int(i), more[i], i % 2 == 0 ? &rows[i] : nullptr});
  }
  batch.eval_batch(work);
  for (size_t i = 0; i < more.size(); ++i) {
    if (i % 2 == 0) {
      ASSERT_EQ(rows[i], want[i]) << "sequence " << i;
    }
    ASSERT_EQ(batch.logits(int(i)), alone[i]->logits()) << "sequence " << i;
  }
}

TEST(SessionBatch, AttentionSequencesEqualAlone) {
  LOAD_OR_SKIP(m, "llama-q8_0.mlb");
  expect_batch_equals_alone(*m);
}

TEST(SessionBatch, SlidingWindowSequencesEqualAlone) {
  LOAD_OR_SKIP(m, "gemma3-q4_0.mlb");
  expect_batch_equals_alone(*m);
}

TEST(SessionBatch, DeltaNetSequencesEqualAlone) {
  LOAD_OR_SKIP(m, "qwen35-long-q8_0.mlb");
  expect_batch_equals_alone(*m);
}

TEST(SessionBatch, RefusesBadWorkBeforeEvaluatingAny) {
  LOAD_OR_SKIP(m, "llama-q8_0.mlb");
  SessionOptions o = kOptions;
  o.n_seqs = 2;
  Session s(*m, o);
  const std::vector<int32_t> ok = {1, 2, 3}, bad = {1, m->config().n_vocab};
  EXPECT_THROW(s.eval_batch(std::vector<SeqTokens>{{0, ok}, {0, ok}}), Error);  // listed twice
  EXPECT_THROW(s.eval_batch(std::vector<SeqTokens>{{0, ok}, {2, ok}}), Error);  // no sequence 2
  EXPECT_THROW(s.eval_batch(std::vector<SeqTokens>{{0, ok}, {1, bad}}), Error);
  EXPECT_EQ(s.n_past(0), 0);
  EXPECT_EQ(s.n_past(1), 0);
  const std::vector<int32_t> long_prompt(513, 1);
  EXPECT_THROW(s.eval_batch(std::vector<SeqTokens>{{1, ok}, {0, long_prompt}}), Error);
  EXPECT_EQ(s.n_past(1), 0);
}

// A draft model's session on the main session's threads (SessionOptions::share_threads): both
// give the logits they give on threads of their own, used in turns.
TEST(SessionThreads, SharedThreadsGiveTheSameLogits) {
  LOAD_OR_SKIP(main, "llama-q8_0.mlb");
  LOAD_OR_SKIP(draft, "llama-q4_0.mlb");
  const std::vector<int32_t> ids = prompt(37, 5, main->config().n_vocab);
  Session a(*main, kOptions);
  SessionOptions so = kOptions;
  so.share_threads = &a;
  Session b(*draft, so);
  EXPECT_EQ(b.n_threads(), a.n_threads());
  for (int i = 0; i < 3; ++i) {
    const auto part = std::span<const int32_t>(ids).subspan(size_t(i) * 12, 12);
    a.eval(part);
    b.eval(part);
  }
  const std::vector<int32_t> head(ids.begin(), ids.begin() + 36);
  EXPECT_EQ(a.logits(), fresh_logits(*main, head));
  EXPECT_EQ(b.logits(), fresh_logits(*draft, head));
}

// ml_server's slots draft together (Drafter::draw_all: one forward step of the draft model for
// every drafted position of all of them): each sequence gets the tokens and distributions its
// drafter draws alone, with a cache that held another history before (cut back first) or
// nothing, and a drafter asked for no tokens draws none.
TEST(DrafterBatch, DrawAllEqualsEachAlone) {
  LOAD_OR_SKIP(draft, "llama-q4_0.mlb");
  const int vocab = draft->config().n_vocab;
  const std::vector<std::vector<int32_t>> hists = {prompt(30, 1, vocab), prompt(9, 2, vocab),
                                                   prompt(50, 3, vocab), prompt(12, 4, vocab)};
  const std::vector<int> n = {6, 3, 0, 8};
  const auto params = [](size_t i) {
    SamplerParams p;
    p.temperature = i == 1 ? 0.0f : 1.0f;  // greedy and sampled
    p.seed = 100 + i;
    return p;
  };
  SessionOptions so = kOptions;
  so.n_seqs = int(hists.size());
  Session together(*draft, so);
  together.eval_batch(std::vector<SeqTokens>{{0, std::span<const int32_t>(hists[2]).first(20)}});
  std::vector<Sampler> samplers;
  std::vector<Drafter> drafters;
  samplers.reserve(hists.size());
  drafters.reserve(hists.size());
  for (size_t i = 0; i < hists.size(); ++i) {
    samplers.emplace_back(params(i));
    drafters.emplace_back(together, samplers.back(), 0.0f, int(i));
  }
  std::vector<Drafter*> ds;
  for (Drafter& d : drafters) ds.push_back(&d);
  const std::vector<std::span<const int32_t>> hs(hists.begin(), hists.end());
  const auto got = Drafter::draw_all(ds, hs, n);
  ASSERT_EQ(got.size(), hists.size());
  for (size_t i = 0; i < hists.size(); ++i) {
    Session alone(*draft, kOptions);
    Sampler sampler(params(i));
    Drafter d(alone, sampler, 0.0f);
    const std::vector<int32_t> want = n[i] > 0 ? d.draw(hists[i], n[i]) : std::vector<int32_t>{};
    EXPECT_EQ(got[i], want) << "sequence " << i;
    EXPECT_EQ(int(got[i].size()), std::max(n[i], 0)) << "sequence " << i;
    if (n[i] > 0) {
      ASSERT_EQ(drafters[i].q().size(), d.q().size());
      for (size_t k = 0; k < d.q().size(); ++k) {
        ASSERT_EQ(drafters[i].q()[k].size(), d.q()[k].size());
        for (size_t t = 0; t < d.q()[k].size(); ++t) {
          EXPECT_EQ(drafters[i].q()[k][t].id, d.q()[k][t].id);
          EXPECT_EQ(drafters[i].q()[k][t].p, d.q()[k][t].p);
        }
      }
    }
  }
}

}  // namespace
}  // namespace krafla
