#include "model/forward.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"
#include "krafla/error.h"
#include "ops/attention.h"
#include "ops/delta.h"

namespace krafla {

namespace K = kernels;
using K::WType;

namespace {
int64_t max_matmul_cols(const ModelConfig& c) {
  return std::max<int64_t>({c.dim, int64_t{c.n_heads} * c.head_dim, c.ffn_dim,
                            int64_t{c.lin_v_heads} * c.lin_v_dim});
}
}  // namespace

Forward::Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch)
    : m_(model),
      c_(model.cfg),
      pool_(pool),
      n_ctx_(n_ctx),
      n_batch_(n_batch),
      mm_(pool, n_batch, max_matmul_cols(model.cfg)) {
  const int64_t hd = c_.head_dim, q_dim = int64_t{c_.n_heads} * hd;
  const int64_t kv_dim = int64_t{c_.n_kv_heads} * hd;
  const size_t B = n_batch;
  if (c_.has_linear()) delta_ = std::make_unique<delta::Block>(c_, n_batch, mm_);
  if (c_.attn_gate) agate_.resize(B * q_dim * sizeof(float));

  // cos/sin in float as transformers computes them (angle = float(pos) * inv_freq in f32), so
  // long positions round the same way the reference does.
  const int64_t half = c_.rope_dim / 2;
  const auto fill = [&](const std::vector<float>& freqs, AlignedBuffer& cos_t, AlignedBuffer& sin_t) {
    cos_t.resize(size_t(n_ctx) * half * sizeof(float));
    sin_t.resize(size_t(n_ctx) * half * sizeof(float));
    for (int p = 0; p < n_ctx; ++p)
      for (int64_t i = 0; i < half; ++i) {
        const float angle = float(p) * freqs[i];
        cos_t.data<float>()[p * half + i] = float(std::cos(double(angle))) * c_.rope_attn_factor;
        sin_t.data<float>()[p * half + i] = float(std::sin(double(angle))) * c_.rope_attn_factor;
      }
  };
  fill(c_.rope_freqs, rope_cos_, rope_sin_);
  if (!c_.rope_freqs_local.empty()) fill(c_.rope_freqs_local, rope_cos_local_, rope_sin_local_);

  x_.resize(B * c_.dim * sizeof(float));
  h_.resize(B * c_.dim * sizeof(float));
  tmp_.resize(B * c_.dim * sizeof(float));
  q_.resize(B * q_dim * sizeof(float));
  att_.resize(B * q_dim * sizeof(float));
  k_.resize(B * kv_dim * sizeof(float));
  v_.resize(B * kv_dim * sizeof(float));
  gate_.resize(B * c_.ffn_dim * sizeof(float));
  up_.resize(B * c_.ffn_dim * sizeof(float));
  scores_.resize(size_t(pool.size()) * (c_.n_heads / c_.n_kv_heads) * n_ctx * sizeof(float));
}

void Forward::attention(KvCache& kv, int layer, int n, int pos0) {
  const int64_t hd = c_.head_dim, half = c_.rope_dim / 2;
  const int64_t q_dim = int64_t{c_.n_heads} * hd, kv_dim = int64_t{c_.n_kv_heads} * hd;
  const int group = c_.n_heads / c_.n_kv_heads;
  const float scale = c_.attn_scale;
  const LayerWeights& L = m_.layers[layer];
  const LayerConfig& lc = c_.layers[layer];
  const bool local = lc.rope == LayerConfig::Rope::Local;
  const float* cos_table = (local ? rope_cos_local_ : rope_cos_).data<float>();
  const float* sin_table = (local ? rope_sin_local_ : rope_sin_).data<float>();
  const int64_t window = lc.window;
  // RoPE on q and k, then k and v into the cache.
  pool_.for_each(n, [&](int64_t t) {
    {
      const int64_t pos = pos0 + t;
      const float* cs = cos_table + pos * half;
      const float* sn = sin_table + pos * half;
      float* q = q_.data<float>() + t * q_dim;
      float* k = k_.data<float>() + t * kv_dim;
      float* v = v_.data<float>() + t * kv_dim;
      if (L.bq) {
        K::add_f32(q, L.bq, q, q_dim);
        K::add_f32(k, L.bk, k, kv_dim);
        K::add_f32(v, L.bv, v, kv_dim);
      }
      if (L.q_norm) {
        for (int h = 0; h < c_.n_heads; ++h)
          K::rmsnorm(q + h * hd, L.q_norm, 0.0f, c_.norm_eps, q + h * hd, hd);
        for (int h = 0; h < c_.n_kv_heads; ++h)
          K::rmsnorm(k + h * hd, L.k_norm, 0.0f, c_.norm_eps, k + h * hd, hd);
      }
      if (lc.rope != LayerConfig::Rope::None) {
        K::rope(q, c_.n_heads, hd, c_.rope_dim, cs, sn);
        K::rope(k, c_.n_kv_heads, hd, c_.rope_dim, cs, sn);
      }
      for (int h = 0; h < c_.n_kv_heads; ++h) kv.store(layer, h, pos, k + h * hd, v + h * hd);
    }
  });
  // Units of work: (token, KV head) with the whole query group, so each cached K/V row is read
  // once per group; when that leaves threads idle (decode with few KV heads), (token, head).
  // Either way each head's result is bit-identical (attend_group).
  const int per_unit = int64_t{n} * c_.n_kv_heads >= pool_.size() ? group : 1;
  const int64_t heads_per_tok = c_.n_heads / per_unit;
  pool_.split(int64_t{n} * heads_per_tok, [&](int ti, int64_t u0, int64_t u1) {
    float* scores = scores_.data<float>() + size_t(ti) * group * n_ctx_;
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t t = u / heads_per_tok, h = (u % heads_per_tok) * per_unit, kvh = h / group;
      const int64_t pos = pos0 + t;
      // Sliding window (Mistral, some Qwen2 layers): the query sees keys at distance < window.
      const int64_t first = window > 0 ? std::max<int64_t>(0, pos - window + 1) : 0;
      const KvCache::HeadView cached = kv.head(layer, int(kvh));
      attend_group(q_.data<float>() + t * q_dim + h * hd, per_unit, cached.k_f32(first),
                   cached.v_f32(first), pos + 1 - first, hd, hd, scale,
                   c_.attn_softcap, scores, att_.data<float>() + t * q_dim + h * hd);
    }
  });
}

void Forward::attention_block(KvCache& kv, int l, int n, int pos0) {
  const LayerWeights& L = m_.layers[l];
  const int64_t q_dim = int64_t{c_.n_heads} * c_.head_dim;
  float* h = h_.data<float>();
  if (c_.attn_gate) {
    mm_.run(h, c_.dim, n, {{&L.wq, q_.data<float>()}, {&L.wk, k_.data<float>()},
                           {&L.wv, v_.data<float>()}, {&L.wgate, agate_.data<float>()}});
  } else {
    mm_.run(h, c_.dim, n, {{&L.wq, q_.data<float>()}, {&L.wk, k_.data<float>()},
                           {&L.wv, v_.data<float>()}});
  }
  attention(kv, l, n, pos0);
  if (c_.attn_gate) {  // Qwen3.5: out = attention * sigmoid(gate), element-wise
    float* a = att_.data<float>();
    const float* g = agate_.data<float>();
    pool_.for_each(int64_t{n} * q_dim, [&](int64_t i) { a[i] = a[i] / (1.0f + std::exp(-g[i])); });
  }
  mm_.run(att_.data<float>(), q_dim, n, {{&L.wo, tmp_.data<float>()}});
}

void Forward::run(SequenceState& seq, const int32_t* tokens, int n, int pos0, bool all_logits,
                  float* logits) {
  if (n <= 0 || n > n_batch_ || pos0 < 0 || pos0 + n > std::min(n_ctx_, seq.n_ctx()))
    throw Error(fmt::format("internal: forward of {} tokens at {} (batch {}, ctx {})", n, pos0,
                            n_batch_, n_ctx_));
  const int64_t dim = c_.dim, ffn = c_.ffn_dim;
  float* x = x_.data<float>();
  float* h = h_.data<float>();
  const size_t embd_row = K::row_bytes(m_.tok_embd.type, dim);
  for (int t = 0; t < n; ++t)
    K::dequantize_row(m_.tok_embd.type, m_.tok_embd.stored + size_t(tokens[t]) * embd_row,
                      x + t * dim, dim);
  if (c_.embd_scale != 1.0f)
    for (int t = 0; t < n; ++t) K::scale_f32(x + t * dim, c_.embd_scale, dim);

  for (int l = 0; l < c_.n_layers; ++l) {
    const LayerWeights& L = m_.layers[l];
    pool_.for_each(n, [&](int64_t t) {
      K::rmsnorm(x + t * dim, L.attn_norm, 0.0f, c_.norm_eps, h + t * dim, dim);
    });
    if (c_.layers[l].kind == LayerConfig::Kind::Linear) {
      delta_->run(L.ssm, seq.linear, l, h, n, tmp_.data<float>());
    } else {
      attention_block(seq.kv, l, n, pos0);
    }
    pool_.for_each(n, [&](int64_t t) {
      {
        float* o = tmp_.data<float>() + t * dim;
        if (L.attn_post_norm) K::rmsnorm(o, L.attn_post_norm, 0.0f, c_.norm_eps, o, dim);
        K::add_f32(x + t * dim, o, x + t * dim, dim);
        K::rmsnorm(x + t * dim, L.ffn_norm, 0.0f, c_.norm_eps, h + t * dim, dim);
      }
    });
    mm_.run(h, dim, n, {{&L.gate, gate_.data<float>()}, {&L.up, up_.data<float>()}});
    const bool gelu = c_.activation == ModelConfig::Activation::GeluTanh;
    pool_.for_each(n, [&](int64_t t) {
      {
        float* g = gate_.data<float>() + t * ffn;
        if (gelu) {
          K::geglu(g, up_.data<float>() + t * ffn, g, ffn);
        } else {
          K::swiglu(g, up_.data<float>() + t * ffn, g, ffn);
        }
      }
    });
    mm_.run(gate_.data<float>(), ffn, n, {{&L.down, tmp_.data<float>()}});
    for (int t = 0; t < n; ++t) {
      float* o = tmp_.data<float>() + t * dim;
      if (L.ffn_post_norm) K::rmsnorm(o, L.ffn_post_norm, 0.0f, c_.norm_eps, o, dim);
      K::add_f32(x + t * dim, o, x + t * dim, dim);
    }
  }

  const int first = all_logits ? 0 : n - 1;
  const int rows = n - first;
  for (int t = first; t < n; ++t)
    K::rmsnorm(x + t * dim, m_.output_norm, 0.0f, c_.norm_eps, h + (t - first) * dim, dim);
  mm_.run(h, dim, rows, {{&m_.logits_matrix(), logits}});
  if (const float cap = c_.final_softcap; cap > 0) {
    const size_t total = size_t(rows) * c_.n_vocab;
    for (size_t i = 0; i < total; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
}

}  // namespace krafla
