#include "ops/delta.h"

#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace krafla::delta {

namespace K = kernels;

void conv_silu(const float* wt, int taps, float* state, const float* in, int64_t n, int64_t C,
               int64_t c0, int64_t c1, float* out) {
  const int hist = taps - 1;
  const auto row = [&](int64_t r) -> const float* {  // row r of [state; in]
    return r < hist ? state + r * C : in + (r - hist) * C;
  };
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * C;
    const float* x0 = row(t);
    for (int64_t c = c0; c < c1; ++c) o[c] = wt[c] * x0[c];
    for (int j = 1; j < taps; ++j) {
      const float* w = wt + j * C;
      const float* x = row(t + j);
      for (int64_t c = c0; c < c1; ++c) o[c] += w[c] * x[c];
    }
    for (int64_t c = c0; c < c1; ++c) o[c] = o[c] / (1.0f + std::exp(-o[c]));
  }
  // Shift the history: new row r is old row n + r of [state; in] (always a later row, so the
  // in-place update reads nothing it has overwritten).
  for (int r = 0; r < hist; ++r) {
    const float* src = row(n + r);
    std::memcpy(state + r * C + c0, src + c0, sizeof(float) * (c1 - c0));
  }
}

void l2norm(float* x, int64_t n, float scale) {
  const float ss = K::dot_f32(x, x, n);
  K::scale_f32(x, scale / std::sqrt(ss + 1e-6f), n);
}

}  // namespace krafla::delta

namespace krafla::delta {

State::State(const ModelConfig& c) {
  int n_lin = 0;
  for (const LayerConfig& l : c.layers)
    slot_.push_back(l.kind == LayerConfig::Kind::Linear ? n_lin++ : -1);
  if (n_lin == 0) return;
  conv_elems_ = size_t(c.lin_conv - 1) * c.lin_conv_dim();
  ssm_elems_ = size_t(c.lin_v_heads) * c.lin_k_dim * c.lin_v_dim;
  conv_.resize(n_lin * conv_elems_ * sizeof(float));
  ssm_.resize(n_lin * ssm_elems_ * sizeof(float));
  reset();
}

void State::reset() {
  if (conv_.size()) std::memset(conv_.data(), 0, conv_.size());
  if (ssm_.size()) std::memset(ssm_.data(), 0, ssm_.size());
}

float* State::conv(int layer) const { return conv_.data<float>() + slot_[layer] * conv_elems_; }
float* State::ssm(int layer) const { return ssm_.data<float>() + slot_[layer] * ssm_elems_; }

Block::Block(const ModelConfig& c, int n_batch, Matmuls& mm) : c_(c), mm_(mm) {
  const size_t B = n_batch, conv = c.lin_conv_dim(), vd = size_t(c.lin_v_heads) * c.lin_v_dim;
  qkv_.resize(B * conv * sizeof(float));
  conv_.resize(B * conv * sizeof(float));
  z_.resize(B * vd * sizeof(float));
  o_.resize(B * vd * sizeof(float));
  beta_.resize(B * c.lin_v_heads * sizeof(float));
  decay_.resize(B * c.lin_v_heads * sizeof(float));
}

void Block::run(const Weights& w, int layer, const float* h, int n, std::span<const Rows> seqs,
                float* out) {
  mm_.run(Op::MatDeltaIn, h, c_.dim, n,
          {{&w.qkv, qkv_.data<float>()},
           {&w.z, z_.data<float>()},
           {&w.beta, beta_.data<float>()},
           {&w.alpha, decay_.data<float>()}});
  {
    const ProfileScope scope(mm_.profile(), Op::DeltaRule);
    conv(w, layer, seqs);
    gates(w, n);
    recur(layer, seqs);
    gated_norm(w, n);
  }
  mm_.run(Op::MatDeltaOut, o_.data<float>(), int64_t{c_.lin_v_heads} * c_.lin_v_dim, n,
          {{&w.out, out}});
}

// The causal conv, channels split across threads (each owns its slice of every conv state).
void Block::conv(const Weights& w, int layer, std::span<const Rows> seqs) {
  const int64_t C = c_.lin_conv_dim();
  mm_.pool().split(C, [&](int64_t c0, int64_t c1) {
    for (const Rows& s : seqs)
      conv_silu(w.conv_t.data(), c_.lin_conv, s.state->conv(layer), qkv_.data<float>() + s.row0 * C,
                s.n, C, c0, c1, conv_.data<float>() + s.row0 * C);
  });
}

// Per token: l2-normalized q (times dk^-1/2) and k, beta = sigmoid(b), and the decay
// exp(g) with g = -exp(A_log) * softplus(a + dt_bias) (torch's softplus: linear above 20).
void Block::gates(const Weights& w, int n) {
  const int64_t C = c_.lin_conv_dim(), nk = c_.lin_k_heads, nv = c_.lin_v_heads;
  const int64_t dk = c_.lin_k_dim, kd = nk * dk;
  const float q_scale = 1.0f / std::sqrt(float(dk));
  float* beta = beta_.data<float>();
  float* decay = decay_.data<float>();
  mm_.pool().for_each(n, [&](int64_t t) {
    float* row = conv_.data<float>() + t * C;
    for (int64_t hk = 0; hk < nk; ++hk) {
      l2norm(row + hk * dk, dk, q_scale);
      l2norm(row + kd + hk * dk, dk, 1.0f);
    }
    for (int64_t hv = 0; hv < nv; ++hv) {
      float& b = beta[t * nv + hv];
      b = 1.0f / (1.0f + std::exp(-b));
      const float a = decay[t * nv + hv] + w.dt_bias[hv];
      const float softplus = a > 20.0f ? a : std::log1p(std::exp(a));
      decay[t * nv + hv] = std::exp(w.a[hv] * softplus);
    }
  });
}

// The recurrence: (sequence, value head) pairs split across threads, tokens in order within
// each.
void Block::recur(int layer, std::span<const Rows> seqs) {
  const int64_t C = c_.lin_conv_dim(), nk = c_.lin_k_heads, nv = c_.lin_v_heads;
  const int64_t dk = c_.lin_k_dim, dv = c_.lin_v_dim, kd = nk * dk, vd = nv * dv;
  const int64_t group = nv / nk;
  const float* conv = conv_.data<float>();
  const float* beta = beta_.data<float>();
  const float* decay = decay_.data<float>();
  float* o = o_.data<float>();
  mm_.pool().for_each(int64_t(seqs.size()) * nv, [&](int64_t u) {
    const Rows& s = seqs[u / nv];
    const int64_t hv = u % nv, hk = hv / group;
    float* ssm = s.state->ssm(layer);
    for (int64_t t = s.row0; t < s.row0 + s.n; ++t) {
      const float* row = conv + t * C;
      K::delta_step(ssm + hv * dk * dv, row + hk * dk, row + kd + hk * dk, row + 2 * kd + hv * dv,
                    decay[t * nv + hv], beta[t * nv + hv], dk, dv, o + t * vd + hv * dv);
    }
  });
}

// Gated RMSNorm per value head: rmsnorm(o) * w * silu(z).
void Block::gated_norm(const Weights& w, int n) {
  const int64_t nv = c_.lin_v_heads, dv = c_.lin_v_dim, vd = nv * dv;
  float* o = o_.data<float>();
  const float* z = z_.data<float>();
  mm_.pool().for_each(n, [&](int64_t t) {
    for (int64_t hv = 0; hv < nv; ++hv) {
      float* oh = o + t * vd + hv * dv;
      K::rmsnorm(oh, w.norm, c_.norm_eps, oh, dv);
      K::swiglu(z + t * vd + hv * dv, oh, oh, dv);
    }
  });
}

}  // namespace krafla::delta
