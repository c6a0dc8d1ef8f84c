#include "ops/moe.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace krafla::moe {

namespace K = kernels;

void route(float* logits, int n_experts, int k, bool norm, int32_t* experts, float* weights) {
  // softmax in float32, max-subtracted, as torch's; the probabilities replace the logits
  float* p = logits;
  float mx = p[0];
  for (int e = 1; e < n_experts; ++e) mx = std::max(mx, p[e]);
  float sum = 0;
  for (int e = 0; e < n_experts; ++e) sum += p[e] = std::exp(p[e] - mx);
  for (int e = 0; e < n_experts; ++e) p[e] /= sum;
  // top-k by selection: the largest remaining p, the lowest index among equal ones
  constexpr float kTaken = -1.0f;
  float chosen_sum = 0;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int e = 0; e < n_experts; ++e)
      if (p[e] != kTaken && (best < 0 || p[e] > p[best])) best = e;
    experts[j] = best;
    weights[j] = p[best];
    chosen_sum += p[best];
    p[best] = kTaken;
  }
  if (norm)
    for (int j = 0; j < k; ++j) weights[j] /= chosen_sum;
  // ascending expert order: the order the outputs are summed in (transformers' loop)
  for (int j = 1; j < k; ++j)
    for (int i = j; i > 0 && experts[i - 1] > experts[i]; --i) {
      std::swap(experts[i - 1], experts[i]);
      std::swap(weights[i - 1], weights[i]);
    }
}

Block::Block(const ModelConfig& c, int n_batch, Matmuls& mm)
    : c_(c), mm_(mm), pool_(mm.pool()), n_batch_(n_batch) {
  const size_t B = n_batch, k = c.n_experts_used, slots = B * k;
  logits_.resize(B * (c.n_experts + 1) * sizeof(float));
  row_expert_.resize(slots);
  row_weight_.resize(slots);
  row_slot_.resize(slots);
  slot_row_.resize(slots);
  start_.resize(size_t(c.n_experts) + 1);
  g_.resize(slots * c.expert_ffn_dim * sizeof(float));
  u_.resize(slots * c.expert_ffn_dim * sizeof(float));
  y_.resize(slots * c.dim * sizeof(float));
  if (c.shared_expert_ffn_dim > 0) {
    sg_.resize(B * c.shared_expert_ffn_dim * sizeof(float));
    su_.resize(B * c.shared_expert_ffn_dim * sizeof(float));
    sy_.resize(B * c.dim * sizeof(float));
  }
}

void Block::group(int n) {
  const int E = c_.n_experts, k = c_.n_experts_used;
  float* logits = logits_.data<float>();
  pool_.for_each(n, [&](int64_t t) {
    route(logits + t * E, E, k, c_.norm_topk_prob, &row_expert_[t * k], &row_weight_[t * k]);
  });
  // counting sort of the slots by expert; within an expert, by row
  std::fill(start_.begin(), start_.end(), 0);
  for (int i = 0; i < n * k; ++i) ++start_[row_expert_[i] + 1];
  for (int e = 0; e < E; ++e) start_[e + 1] += start_[e];
  std::vector<int32_t>& next = next_;
  next.assign(start_.begin(), start_.end() - 1);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const int32_t s = next[row_expert_[t * k + j]]++;
      slot_row_[s] = t;
      row_slot_[t * k + j] = s;
    }
}

// Quantizes each slot's input row for weights of type t into dst (rows of act_row_size): the
// row of its token, rows[s] of x, each token's row quantized once (into tok) and copied to
// its slots; without rows, slot s's own row s of x.
static void gather_act(ThreadPool& pool, K::WType t, const float* x, int64_t cols,
                       const int32_t* rows, int n_rows, int n, AlignedBuffer& tok,
                       AlignedBuffer& dst) {
  const size_t rb = K::act_row_size(t, cols);
  if (dst.size() < size_t(n) * rb) dst.resize(size_t(n) * rb);
  if (!rows) {
    pool.for_each(n,
                  [&](int64_t s) { K::quantize_act(t, x + s * cols, cols, dst.data() + s * rb); });
    return;
  }
  if (tok.size() < size_t(n_rows) * rb) tok.resize(size_t(n_rows) * rb);
  pool.for_each(n_rows,
                [&](int64_t r) { K::quantize_act(t, x + r * cols, cols, tok.data() + r * rb); });
  pool.for_each(
      n, [&](int64_t s) { std::memcpy(dst.data() + s * rb, tok.data() + rows[s] * rb, rb); });
}

void Block::experts(const Weights& w, const float* x, int n) {
  const int E = c_.n_experts, S = n * c_.n_experts_used;
  const int64_t I = c_.expert_ffn_dim, dim = c_.dim;
  const int64_t tile = K::row_tile();
  const int nt = pool_.size();
  float* g = g_.data<float>();
  float* u = u_.data<float>();
  float* y = y_.data<float>();
  {
    const ProfileScope scope(mm_.profile(), Op::MatGateUp);
    // The experts of one layer share their weight types (docs/format.md).
    const K::WType tg = w.gate[0].type, tu = w.up[0].type;
    if (Imatrix* im = mm_.imatrix())  // each expert's inputs: the rows routed to it
      for (int e = 0; e < E; ++e)
        for (int s = start_[e]; s < start_[e + 1]; ++s)
          for (const Matrix* m : {&w.gate[e], &w.up[e]})
            im->add(m->name, x + slot_row_[s] * dim, dim, 1);
    gather_act(pool_, tg, x, dim, slot_row_.data(), n, S, act_tok_, act_gate_);
    if (tu != tg) gather_act(pool_, tu, x, dim, slot_row_.data(), n, S, act_tok_, act_up_);
    const AlignedBuffer& au = tu != tg ? act_up_ : act_gate_;
    const size_t rg = K::act_row_size(tg, dim), ru = K::act_row_size(tu, dim);
    const bool gelu = c_.activation == ModelConfig::Activation::GeluTanh;
    pool_.run([&](int ti) {
      const auto [r0, r1] = split_range(I, ti, nt, tile);
      for (int e = 0; e < E; ++e) {
        const int s0 = start_[e], ne = start_[e + 1] - s0;
        if (ne == 0 || r0 >= r1) continue;
        // chunks whose outputs are still in cache when the activation reads them (run_then)
        const int64_t chunk = std::max<int64_t>(tile, 32768 / ne / tile * tile);
        for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
          const int64_t c1 = std::min(r1, c0 + chunk);
          K::matmul(tg, w.gate[e].packed_data(), I, dim, c0, c1, act_gate_.data() + s0 * rg, ne,
                    g + s0 * I, I);
          K::matmul(tu, w.up[e].packed_data(), I, dim, c0, c1, au.data() + s0 * ru, ne, u + s0 * I,
                    I);
          for (int s = s0; s < s0 + ne; ++s) glu(gelu, g + s * I + c0, u + s * I + c0, c1 - c0);
        }
      }
    });
  }
  const ProfileScope scope(mm_.profile(), Op::MatDown);
  const K::WType td = w.down[0].type;
  if (Imatrix* im = mm_.imatrix())
    for (int e = 0; e < E; ++e)
      if (start_[e + 1] > start_[e])
        im->add(w.down[e].name, g + start_[e] * I, I, start_[e + 1] - start_[e]);
  gather_act(pool_, td, g, I, nullptr, S, S, act_tok_, act_down_);
  const size_t rd = K::act_row_size(td, I);
  pool_.run([&](int ti) {
    const auto [r0, r1] = split_range(dim, ti, nt, tile);
    for (int e = 0; e < E; ++e) {
      const int s0 = start_[e], ne = start_[e + 1] - s0;
      if (ne == 0 || r0 >= r1) continue;
      K::matmul(td, w.down[e].packed_data(), dim, I, r0, r1, act_down_.data() + s0 * rd, ne,
                y + s0 * dim, dim);
    }
  });
}

void Block::shared(const Weights& w, const float* x, int n) {
  mm_.mlp(w.shared_gate, w.shared_up, w.shared_down,
          c_.activation == ModelConfig::Activation::GeluTanh, x, n, sg_.data<float>(),
          su_.data<float>(), sy_.data<float>());
}

void Block::run(const Weights& w, const float* x, int n, float* out) {
  const int E = c_.n_experts, k = c_.n_experts_used;
  const int64_t dim = c_.dim;
  const bool has_shared = c_.shared_expert_ffn_dim > 0;
  float* logits = logits_.data<float>();
  float* shared_logit = logits + int64_t(n_batch_) * E;  // (batch) after the routers' rows
  if (has_shared) {
    mm_.run(Op::MoeRoute, x, dim, n, {{&w.router, logits}, {&w.shared_router, shared_logit}});
  } else {
    mm_.run(Op::MoeRoute, x, dim, n, {{&w.router, logits}});
  }
  {
    const ProfileScope scope(mm_.profile(), Op::MoeRoute);
    group(n);
  }
  experts(w, x, n);
  if (has_shared) shared(w, x, n);
  const ProfileScope scope(mm_.profile(), Op::MoeRoute);
  const float* y = y_.data<float>();
  const float* sy = sy_.data<float>();
  pool_.for_each(n, [&](int64_t t) {
    float* o = out + t * dim;
    std::fill(o, o + dim, 0.0f);
    for (int j = 0; j < k; ++j)
      K::axpy_f32(row_weight_[t * k + j], y + int64_t(row_slot_[t * k + j]) * dim, o, dim);
    if (has_shared) {
      const float gate = 1.0f / (1.0f + std::exp(-shared_logit[t]));
      K::axpy_f32(gate, sy + t * dim, o, dim);
    }
  });
}

}  // namespace krafla::moe
