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
#include "krafla/model.h"

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

}  // namespace
}  // namespace krafla
