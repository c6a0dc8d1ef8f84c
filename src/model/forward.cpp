#include "model/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {

namespace K = kernels;

namespace {
int64_t max_matmul_cols(const ModelConfig& c) {
  return std::max<int64_t>({c.dim, int64_t{c.n_heads} * c.head_dim, c.ffn_dim,
                            int64_t{c.lin_v_heads} * c.lin_v_dim, c.shared_expert_ffn_dim});
}
}  // namespace

Forward::Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch,
                 int delta_chunk)
    : m_(model),
      c_(model.cfg),
      pool_(pool),
      n_ctx_(n_ctx),
      n_batch_(n_batch),
      mm_(pool, n_batch, max_matmul_cols(model.cfg)),
      attention_(model.cfg, n_ctx, n_batch, mm_) {
  if (c_.has_linear()) delta_ = std::make_unique<delta::Block>(c_, n_batch, mm_, delta_chunk);
  if (c_.has_moe()) moe_ = std::make_unique<moe::Block>(c_, n_batch, mm_);
  const size_t B = n_batch;
  x_.resize(B * c_.dim * sizeof(float));
  h_.resize(B * c_.dim * sizeof(float));
  tmp_.resize(B * c_.dim * sizeof(float));
  gate_.resize(B * c_.ffn_dim * sizeof(float));
  up_.resize(B * c_.ffn_dim * sizeof(float));
}

void Forward::run(SequenceState& seq, const int32_t* tokens, int n, int pos0, bool all_logits,
                  float* logits) {
  const SeqRows seg{&seq, 0, n, pos0, all_logits ? SeqRows::Logits::All : SeqRows::Logits::Last};
  run(std::span<const SeqRows>(&seg, 1), tokens, logits);
}

void Forward::run(std::span<const SeqRows> segs, const int32_t* tokens, float* logits) {
  int n = 0;
  for (const SeqRows& s : segs) {
    if (s.n <= 0 || s.row0 != n || s.pos0 < 0 || s.pos0 + s.n > std::min(n_ctx_, s.seq->n_ctx()))
      throw Error(fmt::format("internal: forward of {} tokens at {}, row {} (ctx {})", s.n, s.pos0,
                              s.row0, std::min(n_ctx_, s.seq->n_ctx())));
    n += s.n;
  }
  if (n <= 0 || n > n_batch_)
    throw Error(fmt::format("internal: forward of {} tokens (batch {})", n, n_batch_));
  const BatchLayout b(segs);
  delta_rows_.clear();
  for (const SeqRows& s : segs) delta_rows_.push_back({&s.seq->linear, s.row0, s.n});
  if (Imatrix* im = mm_.imatrix()) im->add_tokens(n);
  embed(tokens, n);
  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerWeights& L = m_.layers[l];
    norm(L.attn_norm, n);
    mix(b, l);
    residual(L.attn_post_norm, n);
    norm(L.ffn_norm, n);
    mlp(L, l, n);
    residual(L.ffn_post_norm, n);
  }
  output(segs, logits);
}

void Forward::embed(const int32_t* tokens, int n) {
  const ProfileScope scope(mm_.profile(), Op::Embed);
  const int64_t dim = c_.dim;
  float* x = x_.data<float>();
  for (int t = 0; t < n; ++t) {
    m_.embd_rows.get(tokens[t], x + t * dim, dim);
    if (c_.embd_scale != 1.0f) K::scale_f32(x + t * dim, c_.embd_scale, dim);
  }
}

void Forward::norm(const float* w, int n) {
  const ProfileScope scope(mm_.profile(), Op::Norm);
  const int64_t dim = c_.dim;
  const float* x = x_.data<float>();
  float* h = h_.data<float>();
  pool_.for_each(n, [&](int64_t t) { K::rmsnorm(x + t * dim, w, c_.norm_eps, h + t * dim, dim); });
}

void Forward::mix(const BatchLayout& b, int layer) {
  const LayerWeights& L = m_.layers[layer];
  const LayerConfig& lc = c_.layers[layer];
  if (lc.kind == LayerConfig::Kind::Linear) {
    delta_->run(L.ssm, layer, h_.data<float>(), b.n, delta_rows_, tmp_.data<float>());
  } else {
    attention_.run(L.attn, lc, layer, h_.data<float>(), b, tmp_.data<float>());
  }
}

void Forward::mlp(const LayerWeights& L, int layer, int n) {
  if (c_.layers[layer].moe) {
    moe_->run(L.moe, h_.data<float>(), n, tmp_.data<float>());
    return;
  }
  mm_.mlp(L.gate, L.up, L.down, c_.activation == ModelConfig::Activation::GeluTanh,
          h_.data<float>(), n, gate_.data<float>(), up_.data<float>(), tmp_.data<float>());
}

// Gemma 2/3 norm each block's output before adding it (post_norms).
void Forward::residual(const float* post_norm, int n) {
  const ProfileScope scope(mm_.profile(), Op::Residual);
  const int64_t dim = c_.dim;
  float* x = x_.data<float>();
  float* o = tmp_.data<float>();
  pool_.for_each(n, [&](int64_t t) {
    if (post_norm) K::rmsnorm(o + t * dim, post_norm, c_.norm_eps, o + t * dim, dim);
    K::add_f32(x + t * dim, o + t * dim, x + t * dim, dim);
  });
}

void Forward::output(std::span<const SeqRows> segs, float* logits) {
  const int64_t dim = c_.dim;
  const float* x = x_.data<float>();
  float* h = h_.data<float>();
  int rows = 0;
  {
    const ProfileScope scope(mm_.profile(), Op::Norm);
    for (const SeqRows& s : segs) {
      if (s.logits == SeqRows::Logits::None) continue;
      for (int t = s.logits == SeqRows::Logits::All ? 0 : s.n - 1; t < s.n; ++t)
        K::rmsnorm(x + (s.row0 + t) * dim, m_.output_norm, c_.norm_eps, h + rows++ * dim, dim);
    }
  }
  if (rows == 0) return;
  mm_.run(Op::MatOutput, h, dim, rows, {{&m_.logits_matrix(), logits}});
  if (const float cap = c_.final_softcap; cap > 0) {  // Gemma 2
    const ProfileScope scope(mm_.profile(), Op::MatOutput, false);
    const size_t total = size_t(rows) * c_.n_vocab;
    for (size_t i = 0; i < total; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
}

}  // namespace krafla
