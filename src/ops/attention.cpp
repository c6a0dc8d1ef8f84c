#include "ops/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <span>

#include "kernels/kernels.h"

namespace krafla {

namespace K = kernels;

void attend_group(const float* q, int group, const KvCache::HeadView& kv, int64_t first,
                  int64_t n_keys, float scale, float softcap, float* scores, float* rows,
                  float* out) {
  const int64_t head_dim = kv.head_dim;
  const bool f16 = kv.type == KvType::F16;
  int64_t m = 0;
  for (int64_t j0 = 0; j0 < n_keys; j0 += m) {  // a block of K rows, while in L1
    m = std::min({kKvRows, n_keys - j0, kv.run(first + j0)});
    if (f16)  // the ISA may read the halves as they are
      K::dot_rows_f16(q, group, kv.k_halves(first + j0, m), m, head_dim, scale, scores + j0, n_keys,
                      rows);
    else
      K::dot_rows_f32(q, group, kv.k_rows(first + j0, m, rows), m, head_dim, scale, scores + j0,
                      n_keys);
  }
  for (int g = 0; g < group; ++g) {
    float* s = scores + g * n_keys;
    if (softcap > 0)
      for (int64_t j = 0; j < n_keys; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
    K::softmax(s, n_keys);
  }
  std::memset(out, 0, sizeof(float) * head_dim * group);
  for (int64_t j0 = 0; j0 < n_keys; j0 += m) {  // likewise a block of V rows
    m = std::min({kKvRows, n_keys - j0, kv.run(first + j0)});
    if (f16)
      K::axpy_rows_f16(scores + j0, n_keys, group, kv.v_halves(first + j0, m), m, head_dim, out,
                       rows);
    else
      K::axpy_rows_f32(scores + j0, n_keys, group, kv.v_rows(first + j0, m, rows), m, head_dim,
                       out);
  }
}

AttentionBlock::AttentionBlock(const ModelConfig& c, int n_ctx, int n_batch, Matmuls& mm)
    : c_(c), mm_(mm), n_ctx_(n_ctx) {
  const size_t B = n_batch, q_dim = size_t(c.n_heads) * c.head_dim;
  const size_t kv_dim = size_t(c.n_kv_heads) * c.head_dim;
  rope_ = rope_table(c.rope_freqs, n_ctx);
  if (!c.rope_freqs_local.empty()) rope_local_ = rope_table(c.rope_freqs_local, n_ctx);
  q_.resize(B * q_dim * sizeof(float));
  att_.resize(B * q_dim * sizeof(float));
  k_.resize(B * kv_dim * sizeof(float));
  v_.resize(B * kv_dim * sizeof(float));
  if (c.attn_gate) gate_.resize(B * q_dim * sizeof(float));
  scores_.resize(size_t(mm.pool().size()) * (c.n_heads / c.n_kv_heads) * n_ctx * sizeof(float));
  kv_rows_.resize(size_t(mm.pool().size()) * kKvRows * c.head_dim * sizeof(float));
}

// cos/sin in float as transformers computes them (angle = float(pos) * inv_freq in f32), so
// long positions round the same way the reference does.
AttentionBlock::RopeTable AttentionBlock::rope_table(const std::vector<float>& freqs,
                                                     int n_ctx) const {
  const int64_t half = c_.rope_dim / 2;
  RopeTable t;
  t.cos.resize(size_t(n_ctx) * half);
  t.sin.resize(size_t(n_ctx) * half);
  for (int p = 0; p < n_ctx; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const float angle = float(p) * freqs[i];
      t.cos[p * half + i] = float(std::cos(double(angle))) * c_.rope_attn_factor;
      t.sin[p * half + i] = float(std::sin(double(angle))) * c_.rope_attn_factor;
    }
  return t;
}

void AttentionBlock::run(const AttentionWeights& w, const LayerConfig& lc, int layer,
                         const float* h, const BatchLayout& b, float* out) {
  const int n = b.n;
  project(w, h, n);
  {
    const ProfileScope scope(mm_.profile(), Op::Rope);
    prepare(w, lc, layer, b);
  }
  {
    const ProfileScope scope(mm_.profile(), Op::Attention);
    attend(lc, layer, b);
    if (c_.attn_gate) apply_gate(n);
  }
  mm_.run(Op::MatO, att_.data<float>(), int64_t{c_.n_heads} * c_.head_dim, n, {{&w.wo, out}});
}

void AttentionBlock::project(const AttentionWeights& w, const float* h, int n) {
  const MatJob jobs[] = {{&w.wq, q_.data<float>()},
                         {&w.wk, k_.data<float>()},
                         {&w.wv, v_.data<float>()},
                         {&w.wgate, gate_.data<float>()}};
  mm_.run(Op::MatQkv, h, c_.dim, n, std::span<const MatJob>(jobs, c_.attn_gate ? 4 : 3));
}

void AttentionBlock::prepare(const AttentionWeights& w, const LayerConfig& lc, int layer,
                             const BatchLayout& b) {
  const int64_t hd = c_.head_dim, half = c_.rope_dim / 2;
  const int64_t q_dim = int64_t{c_.n_heads} * hd, kv_dim = int64_t{c_.n_kv_heads} * hd;
  const RopeTable& rope = lc.rope == LayerConfig::Rope::Local ? rope_local_ : rope_;
  mm_.pool().for_each(b.n, [&](int64_t t) {
    const int64_t pos = b.pos(t);
    KvCache& kv = b.seg(t).seq->kv;
    float* q = q_.data<float>() + t * q_dim;
    float* k = k_.data<float>() + t * kv_dim;
    float* v = v_.data<float>() + t * kv_dim;
    if (w.bq) {
      K::add_f32(q, w.bq, q, q_dim);
      K::add_f32(k, w.bk, k, kv_dim);
      K::add_f32(v, w.bv, v, kv_dim);
    }
    if (w.q_norm) {
      for (int h = 0; h < c_.n_heads; ++h)
        K::rmsnorm(q + h * hd, w.q_norm, c_.norm_eps, q + h * hd, hd);
      for (int h = 0; h < c_.n_kv_heads; ++h)
        K::rmsnorm(k + h * hd, w.k_norm, c_.norm_eps, k + h * hd, hd);
    }
    if (lc.rope != LayerConfig::Rope::None) {
      const float* cs = rope.cos.data() + pos * half;
      const float* sn = rope.sin.data() + pos * half;
      K::rope(q, c_.n_heads, hd, c_.rope_dim, cs, sn);
      K::rope(k, c_.n_kv_heads, hd, c_.rope_dim, cs, sn);
    }
    for (int h = 0; h < c_.n_kv_heads; ++h) kv.store(layer, h, pos, k + h * hd, v + h * hd);
  });
}

void AttentionBlock::attend(const LayerConfig& lc, int layer, const BatchLayout& b) {
  const int n = b.n;
  const int64_t hd = c_.head_dim, q_dim = int64_t{c_.n_heads} * hd;
  const int group = c_.n_heads / c_.n_kv_heads;
  // Units of work: (token, KV head) with the whole query group, so each cached K/V row is read
  // once per group; when that leaves threads idle (decode with few KV heads), (token, head).
  // Either way each head's result is bit-identical (attend_group).
  ThreadPool& pool = mm_.pool();
  const int per_unit = int64_t{n} * c_.n_kv_heads >= pool.size() ? group : 1;
  const int64_t heads_per_tok = c_.n_heads / per_unit;
  const auto first_key = [&](int64_t t) {  // sliding window (Mistral, Gemma local layers)
    return lc.window > 0 ? std::max<int64_t>(0, b.pos(t) - lc.window + 1) : 0;
  };
  const auto n_keys = [&](int64_t t) { return b.pos(t) + 1 - first_key(t); };
  // A causal prompt's later tokens have more keys: the threads split the units by their key
  // counts, not by their number (a unit's result does not depend on the thread that runs it).
  const int nt = pool.size();
  const int64_t units = int64_t{n} * heads_per_tok;
  bounds_.assign(size_t(nt) + 1, units);
  bounds_[0] = 0;
  if (nt > 1) {
    constexpr int64_t kUnitCost = 16;  // a unit's fixed work, in keys
    int64_t total = 0;
    for (int t = 0; t < n; ++t) total += n_keys(t) + kUnitCost;
    int64_t done = 0;
    int next = 1;
    for (int t = 0; t < n && next < nt; ++t) {
      const int64_t cost = n_keys(t) + kUnitCost;
      for (int64_t h = 0; h < heads_per_tok && next < nt; ++h) {
        while (next < nt && done * nt >= total * heads_per_tok * next)
          bounds_[size_t(next++)] = t * heads_per_tok + h;
        done += cost;
      }
    }
  }
  const auto work = [&](int ti) {
    float* scores = scores_.data<float>() + size_t(ti) * group * n_ctx_;
    for (int64_t u = bounds_[size_t(ti)]; u < bounds_[size_t(ti) + 1]; ++u) {
      const int64_t t = u / heads_per_tok, h = (u % heads_per_tok) * per_unit;
      const KvCache::HeadView cached = b.seg(t).seq->kv.head(layer, int(h / group));
      attend_group(q_.data<float>() + t * q_dim + h * hd, per_unit, cached, first_key(t), n_keys(t),
                   c_.attn_scale, c_.attn_softcap, scores,
                   kv_rows_.data<float>() + size_t(ti) * kKvRows * hd,
                   att_.data<float>() + t * q_dim + h * hd);
    }
  };
  if (units == 1) {
    work(0);
  } else {
    pool.run(work);
  }
}

// Qwen3.5: out = attention * sigmoid(gate), element-wise.
void AttentionBlock::apply_gate(int n) {
  float* a = att_.data<float>();
  const float* g = gate_.data<float>();
  mm_.pool().for_each(int64_t{n} * c_.n_heads * c_.head_dim,
                      [&](int64_t i) { a[i] = a[i] / (1.0f + std::exp(-g[i])); });
}

}  // namespace krafla
