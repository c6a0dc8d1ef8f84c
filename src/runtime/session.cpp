#include "krafla/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "base/threadpool.h"
#include "krafla/error.h"
#include "model/forward.h"
#include "state/sequence.h"

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

  Impl(const Model& m, std::shared_ptr<ThreadPool> p, int ctx, int batch, KvType kv, int n_seqs,
       int delta_chunk)
      : model(m), pool(std::move(p)), fwd(model_impl(m), *pool, ctx, batch, delta_chunk) {
    for (int i = 0; i < n_seqs; ++i)
      seqs.push_back(std::make_unique<Sequence>(m.config(), ctx, kv));
  }
  Sequence& seq(int i) const {
    if (i < 0 || i >= int(seqs.size()))
      throw Error(fmt::format("sequence {} does not exist (the session has {})", i, seqs.size()));
    return *seqs[i];
  }
  void check(std::span<const SeqTokens> work) const;
  void run(std::span<const SeqTokens> work);
  // Packs the next forward step from work[i] past done[i]; returns its logits destination.
  float* pack_step(std::span<const SeqTokens> work, const std::vector<size_t>& done);
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
  if (o.delta_chunk < 0 || o.delta_chunk > 256)
    throw Error(fmt::format("--delta-chunk {} is out of range (0..256)", o.delta_chunk));
  auto pool = o.share_threads ? o.share_threads->impl_->pool
                              : std::make_shared<ThreadPool>(default_threads(o.n_threads));
  impl_ = std::make_unique<Impl>(model, std::move(pool), ctx, o.n_batch, o.kv_type, o.n_seqs,
                                 o.delta_chunk);
}

Session::~Session() = default;

void Session::eval(std::span<const int32_t> tokens, std::vector<float>* all_logits) {
  const SeqTokens work{0, tokens, all_logits};
  impl_->run(std::span<const SeqTokens>(&work, 1));
}

void Session::eval_batch(std::span<const SeqTokens> work) { impl_->run(work); }

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

float* Session::Impl::pack_step(std::span<const SeqTokens> work, const std::vector<size_t>& done) {
  const int B = fwd.n_batch(), n_vocab = model.config().n_vocab;
  step_tokens.clear();
  segs.clear();
  seg_work.clear();
  int rows = 0;
  size_t logit_rows = 0;
  for (size_t i = 0; i < work.size() && rows < B; ++i) {
    const size_t left = work[i].tokens.size() - done[i];
    if (left == 0) continue;
    const int m = int(std::min<size_t>(left, B - rows));
    Sequence& s = *seqs[work[i].seq];
    auto logits = work[i].all_logits                     ? SeqRows::Logits::All
                  : done[i] + m == work[i].tokens.size() ? SeqRows::Logits::Last
                                                         : SeqRows::Logits::None;
    logit_rows += logits == SeqRows::Logits::All ? m : logits == SeqRows::Logits::Last ? 1 : 0;
    segs.push_back({&s.state, rows, m, int(s.history.size()), logits});
    seg_work.push_back(i);
    const auto first = work[i].tokens.begin() + done[i];
    step_tokens.insert(step_tokens.end(), first, first + m);
    rows += m;
  }
  // One segment's logits go straight where they belong; several are gathered, then copied.
  if (segs.size() == 1) {
    const SeqTokens& w = work[seg_work[0]];
    if (w.all_logits) return w.all_logits->data() + done[seg_work[0]] * n_vocab;
    if (segs[0].logits == SeqRows::Logits::Last) return seqs[w.seq]->logits.data();
  }
  step_logits.resize(logit_rows * n_vocab);
  return step_logits.data();
}

void Session::Impl::run(std::span<const SeqTokens> work) {
  check(work);
  const size_t n_vocab = size_t(model.config().n_vocab);
  for (const SeqTokens& w : work)
    if (w.all_logits) w.all_logits->resize(w.tokens.size() * n_vocab);
  std::vector<size_t> done(work.size(), 0);
  for (;;) {
    float* out = pack_step(work, done);
    if (segs.empty()) break;
    fwd.run(segs, step_tokens.data(), out);
    // Histories, and the logits where they did not go straight: a sequence's rows into its
    // all_logits, its last token's into its own logits.
    const bool gathered = out == step_logits.data();
    const float* row = step_logits.data();
    for (size_t k = 0; k < segs.size(); ++k) {
      const SeqTokens& w = work[seg_work[k]];
      size_t& d = done[seg_work[k]];
      Sequence& s = *seqs[w.seq];
      const auto first = w.tokens.begin() + d;
      s.history.insert(s.history.end(), first, first + segs[k].n);
      if (segs[k].logits == SeqRows::Logits::All) {
        if (gathered) {
          std::copy_n(row, segs[k].n * n_vocab, w.all_logits->data() + d * n_vocab);
          row += segs[k].n * n_vocab;
        }
      } else if (segs[k].logits == SeqRows::Logits::Last && gathered) {
        std::copy_n(row, n_vocab, s.logits.begin());
        row += n_vocab;
      }
      d += segs[k].n;
      if (w.all_logits && d == w.tokens.size())
        std::copy_n(w.all_logits->data() + (d - 1) * n_vocab, n_vocab, s.logits.begin());
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
