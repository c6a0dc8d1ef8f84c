#include "krafla/session.h"

#include <fmt/format.h>

#include <algorithm>
#include <thread>

#include "krafla/error.h"
#include "model/forward.h"
#include "runtime/sequence.h"
#include "runtime/threadpool.h"

namespace krafla {

struct Session::Impl {
  const Model& model;
  ThreadPool pool;
  Forward fwd;
  SequenceState seq;
  std::vector<int32_t> history;
  std::vector<float> logits;
  std::vector<float> batch_logits;

  Impl(const Model& m, int threads, int ctx, int batch, KvType kv)
      : model(m), pool(threads), fwd(model_impl(m), pool, ctx, batch), seq(m.config(), ctx, kv) {}
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
  impl_ = std::make_unique<Impl>(model, default_threads(o.n_threads), ctx, o.n_batch, o.kv_type);
  impl_->logits.assign(model.config().n_vocab, 0.0f);
}

Session::~Session() = default;

void Session::eval(std::span<const int32_t> tokens, std::vector<float>* all_logits) {
  auto& s = *impl_;
  const int n_vocab = s.model.config().n_vocab;
  if (tokens.empty()) throw Error("nothing to evaluate: the token list is empty");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= n_vocab)
      throw Error(fmt::format("token id {} at position {} is outside the vocabulary (0..{})",
                              tokens[i], i, n_vocab - 1));
  const int n_past = int(s.history.size());
  if (n_past + int64_t(tokens.size()) > s.fwd.n_ctx())
    throw Error(fmt::format("context full: {} cached + {} new tokens exceed --ctx {}", n_past,
                            tokens.size(), s.fwd.n_ctx()));
  if (all_logits) all_logits->resize(tokens.size() * size_t(n_vocab));
  const int B = s.fwd.n_batch();
  for (size_t i = 0; i < tokens.size(); i += B) {
    const int n = int(std::min<size_t>(B, tokens.size() - i));
    const bool last_chunk = i + n == tokens.size();
    float* out;
    if (all_logits) {
      out = all_logits->data() + i * n_vocab;
    } else {
      out = s.logits.data();
    }
    s.fwd.run(s.seq, tokens.data() + i, n, n_past + int(i), all_logits != nullptr, out);
    s.history.insert(s.history.end(), tokens.begin() + i, tokens.begin() + i + n);
    if (all_logits && last_chunk)
      std::copy_n(all_logits->data() + (tokens.size() - 1) * n_vocab, n_vocab, s.logits.begin());
  }
}

const std::vector<float>& Session::logits() const { return impl_->logits; }

void Session::set_profile(Profile* p) { impl_->fwd.set_profile(p); }
Profile* Session::profile() const { return impl_->fwd.profile(); }
KvType Session::kv_type() const { return impl_->seq.kv.type(); }
size_t Session::kv_bytes() const { return impl_->seq.kv.size_bytes(); }
void Session::set_imatrix(Imatrix* m) { impl_->fwd.set_imatrix(m); }
const Model& Session::model() const { return impl_->model; }
int Session::n_past() const { return int(impl_->history.size()); }
int Session::n_ctx() const { return impl_->fwd.n_ctx(); }
int Session::n_threads() const { return impl_->pool.size(); }
const std::vector<int32_t>& Session::history() const { return impl_->history; }

void Session::truncate(int n) {
  if (n < 0 || n > n_past())
    throw Error(fmt::format("cannot truncate a {}-token session to {}", n_past(), n));
  if (n == n_past()) return;
  // Attention layers: cache rows past n are simply overwritten by later tokens. A DeltaNet
  // layer's state has folded every token in and cannot be cut back: only a restart works.
  if (n > 0 && impl_->model.config().has_linear())
    throw Error(
        fmt::format("cannot truncate a {}-token session to {}: this model's linear-"
                    "attention state cannot be cut back (only to 0)",
                    n_past(), n));
  if (n == 0) impl_->seq.reset();
  impl_->history.resize(n);
}

int Session::reuse_prefix(std::span<const int32_t> tokens) {
  const auto& h = impl_->history;
  size_t k = 0;
  while (k < h.size() && k < tokens.size() && h[k] == tokens[k]) ++k;
  if (impl_->model.config().has_linear()) {
    // The state can only move forward: keep it when the prompt continues the whole history
    // (with at least one new token, which refreshes the logits), else start over.
    k = (k == h.size() && tokens.size() > k) ? k : 0;
  } else if (k == tokens.size() && k > 0) {
    --k;  // re-evaluate the last token to refresh logits
  }
  truncate(int(k));
  return int(k);
}

}  // namespace krafla
