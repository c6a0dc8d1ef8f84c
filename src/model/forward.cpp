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

Forward::Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch)
    : m_(model), c_(model.cfg), pool_(pool), n_ctx_(n_ctx), n_batch_(n_batch) {
  const int64_t hd = c_.head_dim, q_dim = int64_t{c_.n_heads} * hd;
  const int64_t kv_dim = int64_t{c_.n_kv_heads} * hd;
  int n_kv = 0, n_lin = 0;
  for (int l = 0; l < c_.n_layers; ++l) {
    const bool linear = c_.layers[l].kind == LayerConfig::Kind::Linear;
    kv_slot_.push_back(linear ? -1 : n_kv++);
    lin_slot_.push_back(linear ? n_lin++ : -1);
  }
  const size_t kv_elems = size_t(n_kv) * kv_dim * n_ctx;
  kv_k_.resize(kv_elems * sizeof(float));
  kv_v_.resize(kv_elems * sizeof(float));
  const size_t B = n_batch;
  if (n_lin > 0) {
    const int64_t conv = c_.lin_conv_dim(), vd = int64_t{c_.lin_v_heads} * c_.lin_v_dim;
    conv_state_.resize(size_t(n_lin) * (c_.lin_conv - 1) * conv * sizeof(float));
    ssm_state_.resize(size_t(n_lin) * c_.lin_v_heads * c_.lin_k_dim * c_.lin_v_dim * sizeof(float));
    lin_qkv_.resize(B * conv * sizeof(float));
    lin_conv_.resize(B * conv * sizeof(float));
    lin_z_.resize(B * vd * sizeof(float));
    lin_o_.resize(B * vd * sizeof(float));
    lin_b_.resize(B * c_.lin_v_heads * sizeof(float));
    lin_a_.resize(B * c_.lin_v_heads * sizeof(float));
    reset_state();
  }
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
  const int64_t max_cols = std::max<int64_t>(
      {c_.dim, q_dim, c_.ffn_dim, int64_t{c_.lin_v_heads} * c_.lin_v_dim});
  for (int t = 0; t < 4; ++t) act_[t].resize(B * K::act_row_size(WType(t), max_cols));
  scores_.resize(size_t(pool.size()) * (c_.n_heads / c_.n_kv_heads) * n_ctx * sizeof(float));
}

float* Forward::k_cache(int layer, int kvh) const {
  return kv_k_.data<float>() + (size_t(kv_slot_[layer]) * c_.n_kv_heads + kvh) * n_ctx_ * c_.head_dim;
}
float* Forward::v_cache(int layer, int kvh) const {
  return kv_v_.data<float>() + (size_t(kv_slot_[layer]) * c_.n_kv_heads + kvh) * n_ctx_ * c_.head_dim;
}

void Forward::reset_state() {
  if (conv_state_.size()) std::memset(conv_state_.data(), 0, conv_state_.size());
  if (ssm_state_.size()) std::memset(ssm_state_.data(), 0, ssm_state_.size());
}

void Forward::matmuls(const float* in, int64_t cols, int n, std::initializer_list<MatJob> jobs) {
  bool need[4] = {false, false, false, false};
  for (const auto& j : jobs) need[int(j.m->type)] = true;
  const int nt = pool_.size();
  // Quantize the activation rows once per weight type, tokens split across threads.
  pool_.for_each(n, [&](int64_t tok) {
    for (int t = 0; t < 4; ++t)
      if (need[t])
        K::quantize_act(WType(t), in + tok * cols, cols,
                        act_[t].data() + tok * K::act_row_size(WType(t), cols));
  });
  // Each job's rows split across the threads, all jobs in one parallel region.
  const int64_t tile = K::row_tile();
  pool_.run([&](int ti) {
    for (const auto& j : jobs) {
      auto [r0, r1] = split_range(j.m->rows, ti, nt, tile);
      if (r0 < r1)
        K::matmul(j.m->type, j.m->packed_data(), j.m->rows, j.m->cols, r0, r1,
                  act_[int(j.m->type)].data(), n, j.out, j.m->rows);
    }
  });
}

void Forward::attention(int layer, int n, int pos0) {
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
      for (int h = 0; h < c_.n_kv_heads; ++h) {
        std::memcpy(k_cache(layer, h) + pos * hd, k + h * hd, hd * sizeof(float));
        std::memcpy(v_cache(layer, h) + pos * hd, v + h * hd, hd * sizeof(float));
      }
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
      attend_group(q_.data<float>() + t * q_dim + h * hd, per_unit, k_cache(layer, kvh) + first * hd,
                   v_cache(layer, kvh) + first * hd, pos + 1 - first, hd, hd, scale,
                   c_.attn_softcap, scores, att_.data<float>() + t * q_dim + h * hd);
    }
  });
}

void Forward::attention_block(int l, int n, int pos0) {
  const LayerWeights& L = m_.layers[l];
  const int64_t q_dim = int64_t{c_.n_heads} * c_.head_dim;
  float* h = h_.data<float>();
  if (c_.attn_gate) {
    matmuls(h, c_.dim, n, {{&L.wq, q_.data<float>()}, {&L.wk, k_.data<float>()},
                           {&L.wv, v_.data<float>()}, {&L.wgate, agate_.data<float>()}});
  } else {
    matmuls(h, c_.dim, n, {{&L.wq, q_.data<float>()}, {&L.wk, k_.data<float>()},
                           {&L.wv, v_.data<float>()}});
  }
  attention(l, n, pos0);
  if (c_.attn_gate) {  // Qwen3.5: out = attention * sigmoid(gate), element-wise
    float* a = att_.data<float>();
    const float* g = agate_.data<float>();
    pool_.for_each(int64_t{n} * q_dim, [&](int64_t i) { a[i] = a[i] / (1.0f + std::exp(-g[i])); });
  }
  matmuls(att_.data<float>(), q_dim, n, {{&L.wo, tmp_.data<float>()}});
}

void Forward::delta_block(int l, int n) {
  const LayerWeights& L = m_.layers[l];
  const int64_t C = c_.lin_conv_dim(), nk = c_.lin_k_heads, nv = c_.lin_v_heads;
  const int64_t dk = c_.lin_k_dim, dv = c_.lin_v_dim, vd = nv * dv, kd = nk * dk;
  const int slot = lin_slot_[l];
  float* conv_state = conv_state_.data<float>() + size_t(slot) * (c_.lin_conv - 1) * C;
  float* ssm = ssm_state_.data<float>() + size_t(slot) * nv * dk * dv;
  float* qkv = lin_qkv_.data<float>();
  float* conv = lin_conv_.data<float>();
  float* z = lin_z_.data<float>();
  float* beta = lin_b_.data<float>();
  float* decay = lin_a_.data<float>();
  float* o = lin_o_.data<float>();
  matmuls(h_.data<float>(), c_.dim, n, {{&L.ssm_qkv, qkv}, {&L.ssm_z, z},
                                        {&L.ssm_beta, beta}, {&L.ssm_alpha, decay}});
  // The causal conv, channels split across threads (each owns its slice of the conv state).
  pool_.split(C, [&](int64_t c0, int64_t c1) {
    delta::conv_silu(L.ssm_conv_t.data(), c_.lin_conv, conv_state, qkv, n, C, c0, c1, conv);
  });
  // Per token: l2-normalized q (times dk^-1/2) and k, beta = sigmoid(b), and the decay
  // exp(g) with g = -exp(A_log) * softplus(a + dt_bias) (torch's softplus: linear above 20).
  const float q_scale = 1.0f / std::sqrt(float(dk));
  pool_.for_each(n, [&](int64_t t) {
    {
      float* row = conv + t * C;
      for (int64_t hk = 0; hk < nk; ++hk) {
        delta::l2norm(row + hk * dk, dk, q_scale);
        delta::l2norm(row + kd + hk * dk, dk, 1.0f);
      }
      for (int64_t hv = 0; hv < nv; ++hv) {
        float& b = beta[t * nv + hv];
        b = 1.0f / (1.0f + std::exp(-b));
        const float a = decay[t * nv + hv] + L.ssm_dt_bias[hv];
        const float softplus = a > 20.0f ? a : std::log1p(std::exp(a));
        decay[t * nv + hv] = std::exp(L.ssm_a[hv] * softplus);
      }
    }
  });
  // The recurrence: value heads split across threads, tokens in order within each head.
  const int64_t group = nv / nk;
  pool_.for_each(nv, [&](int64_t hv) {
    {
      const int64_t hk = hv / group;
      for (int64_t t = 0; t < n; ++t) {
        const float* row = conv + t * C;
        K::delta_step(ssm + hv * dk * dv, row + hk * dk, row + kd + hk * dk,
                      row + 2 * kd + hv * dv, decay[t * nv + hv], beta[t * nv + hv], dk, dv,
                      o + t * vd + hv * dv);
      }
    }
  });
  // Gated RMSNorm per value head: rmsnorm(o) * w * silu(z).
  pool_.for_each(n, [&](int64_t t) {
      for (int64_t hv = 0; hv < nv; ++hv) {
        float* oh = o + t * vd + hv * dv;
        K::rmsnorm(oh, L.ssm_norm, 0.0f, c_.norm_eps, oh, dv);
        K::swiglu(z + t * vd + hv * dv, oh, oh, dv);
      }
  });
  matmuls(o, vd, n, {{&L.ssm_out, tmp_.data<float>()}});
}

void Forward::run(const int32_t* tokens, int n, int pos0, bool all_logits, float* logits) {
  if (n <= 0 || n > n_batch_ || pos0 < 0 || pos0 + n > n_ctx_)
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
      delta_block(l, n);
    } else {
      attention_block(l, n, pos0);
    }
    pool_.for_each(n, [&](int64_t t) {
      {
        float* o = tmp_.data<float>() + t * dim;
        if (L.attn_post_norm) K::rmsnorm(o, L.attn_post_norm, 0.0f, c_.norm_eps, o, dim);
        K::add_f32(x + t * dim, o, x + t * dim, dim);
        K::rmsnorm(x + t * dim, L.ffn_norm, 0.0f, c_.norm_eps, h + t * dim, dim);
      }
    });
    matmuls(h, dim, n, {{&L.gate, gate_.data<float>()}, {&L.up, up_.data<float>()}});
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
    matmuls(gate_.data<float>(), ffn, n, {{&L.down, tmp_.data<float>()}});
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
  matmuls(h, dim, rows, {{&m_.logits_matrix(), logits}});
  if (const float cap = c_.final_softcap; cap > 0) {
    const size_t total = size_t(rows) * c_.n_vocab;
    for (size_t i = 0; i < total; ++i) logits[i] = cap * std::tanh(logits[i] / cap);
  }
}

}  // namespace krafla
