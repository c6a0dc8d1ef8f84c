#include "krafla/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "krafla/error.h"
#include "model/forward.h"
#include "runtime/sequence.h"
#include "runtime/threadpool.h"

namespace krafla {

// One sequence: its state, the tokens it holds, its last token's logits.
struct Sequence {
  Sequence(const ModelConfig& c, int ctx, KvType kv) : state(c, ctx, kv), logits(c.n_vocab) {}
  SequenceState state;
  std::vector<int32_t> history;
  std::vector<float> logits;
};

struct Session::Impl {
  const Model& model;
  std::shared_ptr<ThreadPool> pool;  // its own, or shared with another session
  Forward fwd;
  std::vector<std::unique_ptr<Sequence>> seqs;
  // One forward step: its rows, its segments and the work entry each segment comes from, and
  // the logits when several sequences want them (else they go straight to where they belong).
  std::vector<int32_t> step_tokens;
  std::vector<SeqRows> segs;
  std::vector<size_t> seg_work;
  std::vector<float> step_logits;

  Impl(const Model& m, std::shared_ptr<ThreadPool> p, int ctx, int batch, KvType kv, int n_seqs)
      : model(m), pool(std::move(p)), fwd(model_impl(m), *pool, ctx, batch) {
    for (int i = 0; i < n_seqs; ++i)
      seqs.push_back(std::make_unique<Sequence>(m.config(), ctx, kv));
  }
  Sequence& seq(int i) const {
    if (i < 0 || i >= int(seqs.size()))
      throw Error(fmt::format("sequence {} does not exist (the session has {})", i, seqs.size()));
    return *seqs[i];
  }
  void check(std::span<const SeqTokens> work) const;
  void run(std::span<const SeqTokens> work, std::vector<float>* all_logits);
  // Packs the next forward step from work[i] past done[i]; returns its logits destination.
  float* pack_step(std::span<const SeqTokens> work, const std::vector<size_t>& done,
                   std::vector<float>* all_logits);
};

namespace {
int default_threads(int n) { return n > 0 ? n : std::max(1u, std::thread::hardware_concurrency()); }
int default_ctx(const Model& m, int n) {
  if (n > 0) return n;
  return std::min(m.config().max_ctx, 4096);
}
}  // namespace

Session::Session(const Model& model, const SessionOptions& o) {
  if (o.n_batch < 1 || o.n_batch > 128)
    throw Error(fmt::format("--batch {} is out of range (1..128)", o.n_batch));
  if (o.n_ctx < 0) throw Error(fmt::format("--ctx {} is negative", o.n_ctx));
  const int ctx = default_ctx(model, o.n_ctx);
  if (ctx > model.config().max_ctx)
    throw Error(fmt::format("--ctx {} is larger than the model's maximum context {}", ctx,
                            model.config().max_ctx));
  if (o.n_seqs < 1 || o.n_seqs > 256)
    throw Error(fmt::format("--parallel {} is out of range (1..256)", o.n_seqs));
  auto pool = o.share_threads ? o.share_threads->impl_->pool
                              : std::make_shared<ThreadPool>(default_threads(o.n_threads));
  impl_ = std::make_unique<Impl>(model, std::move(pool), ctx, o.n_batch, o.kv_type, o.n_seqs);
}

Session::~Session() = default;

void Session::eval(std::span<const int32_t> tokens, std::vector<float>* all_logits) {
  const SeqTokens work{0, tokens};
  impl_->run(std::span<const SeqTokens>(&work, 1), all_logits);
}

void Session::eval_batch(std::span<const SeqTokens> work) { impl_->run(work, nullptr); }

void Session::Impl::check(std::span<const SeqTokens> work) const {
  const int n_vocab = model.config().n_vocab;
  std::vector<bool> listed(seqs.size());
  for (const SeqTokens& w : work) {
    const Sequence& s = seq(w.seq);
    if (listed[w.seq]) throw Error(fmt::format("sequence {} is listed twice in one batch", w.seq));
    listed[w.seq] = true;
    if (w.tokens.empty()) throw Error("nothing to evaluate: the token list is empty");
    for (size_t i = 0; i < w.tokens.size(); ++i)
      if (w.tokens[i] < 0 || w.tokens[i] >= n_vocab)
        throw Error(fmt::format("token id {} at position {} is outside the vocabulary (0..{})",
                                w.tokens[i], i, n_vocab - 1));
    if (s.history.size() + w.tokens.size() > size_t(fwd.n_ctx()))
      throw Error(fmt::format("context full: {} cached + {} new tokens exceed --ctx {}",
                              s.history.size(), w.tokens.size(), fwd.n_ctx()));
  }
}

float* Session::Impl::pack_step(std::span<const SeqTokens> work, const std::vector<size_t>& done,
                                std::vector<float>* all_logits) {
  const int B = fwd.n_batch(), n_vocab = model.config().n_vocab;
  step_tokens.clear();
  segs.clear();
  seg_work.clear();
  int rows = 0;
  std::vector<Sequence*> with_logits;  // the sequences whose last token this step holds
  for (size_t i = 0; i < work.size() && rows < B; ++i) {
    const size_t left = work[i].tokens.size() - done[i];
    if (left == 0) continue;
    const int m = int(std::min<size_t>(left, B - rows));
    Sequence& s = *seqs[work[i].seq];
    auto logits = all_logits                             ? SeqRows::Logits::All
                  : done[i] + m == work[i].tokens.size() ? SeqRows::Logits::Last
                                                         : SeqRows::Logits::None;
    if (logits == SeqRows::Logits::Last) with_logits.push_back(&s);
    segs.push_back({&s.state, rows, m, int(s.history.size()), logits});
    seg_work.push_back(i);
    const auto first = work[i].tokens.begin() + done[i];
    step_tokens.insert(step_tokens.end(), first, first + m);
    rows += m;
  }
  if (all_logits) return all_logits->data() + done[0] * n_vocab;  // a single sequence
  if (with_logits.size() == 1) return with_logits[0]->logits.data();
  step_logits.resize(with_logits.size() * n_vocab);
  return step_logits.data();
}

void Session::Impl::run(std::span<const SeqTokens> work, std::vector<float>* all_logits) {
  check(work);
  const int n_vocab = model.config().n_vocab;
  if (all_logits) all_logits->resize(work[0].tokens.size() * size_t(n_vocab));
  std::vector<size_t> done(work.size(), 0);
  for (;;) {
    float* out = pack_step(work, done, all_logits);
    if (segs.empty()) break;
    fwd.run(segs, step_tokens.data(), out);
    // Histories, and the logits of the sequences whose last token this step held (when they
    // did not go straight into the sequence's own).
    const bool gathered = !all_logits && out == step_logits.data();
    size_t row = 0;
    for (size_t k = 0; k < segs.size(); ++k) {
      const size_t i = seg_work[k];
      Sequence& s = *seqs[work[i].seq];
      const auto first = work[i].tokens.begin() + done[i];
      s.history.insert(s.history.end(), first, first + segs[k].n);
      done[i] += segs[k].n;
      if (all_logits && done[i] == work[i].tokens.size())
        std::copy_n(all_logits->data() + (done[i] - 1) * n_vocab, n_vocab, s.logits.begin());
      if (gathered && segs[k].logits == SeqRows::Logits::Last)
        std::copy_n(step_logits.data() + row++ * n_vocab, n_vocab, s.logits.begin());
    }
  }
}

const std::vector<float>& Session::logits(int seq) const { return impl_->seq(seq).logits; }

void Session::set_profile(Profile* p) { impl_->fwd.set_profile(p); }
Profile* Session::profile() const { return impl_->fwd.profile(); }
KvType Session::kv_type() const { return impl_->seqs[0]->state.kv.type(); }
size_t Session::kv_bytes() const {
  return impl_->seqs[0]->state.kv.size_bytes() * impl_->seqs.size();
}
void Session::set_imatrix(Imatrix* m) { impl_->fwd.set_imatrix(m); }
const Model& Session::model() const { return impl_->model; }
int Session::n_seqs() const { return int(impl_->seqs.size()); }
int Session::n_past(int seq) const { return int(impl_->seq(seq).history.size()); }
int Session::n_ctx() const { return impl_->fwd.n_ctx(); }
int Session::n_batch() const { return impl_->fwd.n_batch(); }
int Session::n_threads() const { return impl_->pool->size(); }
const std::vector<int32_t>& Session::history(int seq) const { return impl_->seq(seq).history; }

void Session::truncate(int n, int seq) {
  Sequence& s = impl_->seq(seq);
  const int past = int(s.history.size());
  if (n < 0 || n > past)
    throw Error(fmt::format("cannot truncate a {}-token session to {}", past, n));
  if (n == past) return;
  // Attention layers: cache rows past n are simply overwritten by later tokens. A DeltaNet
  // layer's state has folded every token in and cannot be cut back: only a restart works.
  if (n > 0 && impl_->model.config().has_linear())
    throw Error(
        fmt::format("cannot truncate a {}-token session to {}: this model's linear-"
                    "attention state cannot be cut back (only to 0)",
                    past, n));
  if (n == 0) s.state.reset();
  s.history.resize(n);
}

int Session::shared_prefix(std::span<const int32_t> tokens, int seq) const {
  const auto& h = impl_->seq(seq).history;
  size_t k = 0;
  while (k < h.size() && k < tokens.size() && h[k] == tokens[k]) ++k;
  if (impl_->model.config().has_linear()) {
    // The state can only move forward: keep it when the prompt continues the whole history
    // (with at least one new token, which refreshes the logits), else start over.
    k = (k == h.size() && tokens.size() > k) ? k : 0;
  } else if (k == tokens.size() && k > 0) {
    --k;  // re-evaluate the last token to refresh logits
  }
  return int(k);
}

int Session::reuse_prefix(std::span<const int32_t> tokens, int seq) {
  const int k = shared_prefix(tokens, seq);
  truncate(k, seq);
  return k;
}

}  // namespace krafla
