#include "ops/delta.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <utility>

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

void recurrent(float* S, const HeadRun& r, int64_t dk, int64_t dv) {
  for (int64_t t = 0; t < r.n; ++t)
    K::delta_step(S, r.q + t * r.ld_in, r.k + t * r.ld_in, r.v + t * r.ld_in,
                  r.decay[t * r.ld_gate], r.beta[t * r.ld_gate], dk, dv, r.out + t * r.ld_out);
}

namespace {

// dst (cols, rows) = src (rows, cols)^T, strides ld_src and ld_dst; in 16 x 16 blocks, so
// that neither side is walked down a column of a whole power-of-two-strided matrix.
void transpose(const float* src, int64_t rows, int64_t cols, int64_t ld_src, float* dst,
               int64_t ld_dst) {
  constexpr int64_t kB = 16;
  for (int64_t r0 = 0; r0 < rows; r0 += kB)
    for (int64_t c0 = 0; c0 < cols; c0 += kB) {
      const int64_t r1 = std::min(rows, r0 + kB), c1 = std::min(cols, c0 + kB);
      for (int64_t c = c0; c < c1; ++c)
        for (int64_t r = r0; r < r1; ++r) dst[c * ld_dst + r] = src[r * ld_src + c];
    }
}

// out (n_act, rows) at stride ld_out = act (n_act, cols) · w (rows, cols)^T, through the
// kernels' F32 matmul (w packed into `packed` first; F32 activation rows are the floats).
void matmul_nt(const float* w, int64_t rows, int64_t cols, const float* act, int64_t n_act,
               float* out, int64_t ld_out, uint8_t* packed) {
  K::pack(K::WType::F32, w, rows, cols, 0, rows, packed);
  K::matmul(K::WType::F32, packed, rows, cols, 0, rows, act, n_act, out, ld_out);
}

}  // namespace

Chunked::Chunked(int64_t dk, int64_t dv, int64_t chunk) : dk_(dk), dv_(dv), chunk_(chunk) {
  const int64_t C = chunk;
  size_t packed = 0;
  for (auto [rows, cols] : {std::pair{C, dk}, std::pair{C, C}, std::pair{dk, C}})
    packed = std::max(packed, K::packed_size(K::WType::F32, rows, cols));
  const size_t sizes[] = {size_t(2 * C * dk), size_t(2 * C * C), size_t(C * C),   size_t(C * C),
                          size_t(C * C),      size_t(dv * C),    size_t(dv * C),  size_t(dv * C),
                          size_t(dv * C),     size_t(dk * C),    size_t(dv * dk), size_t(dv * dk),
                          size_t(2 * C)};
  float** slots[] = {&kq_, &gram_, &gam_, &t_, &aq_, &ks0_, &qs0_,
                     &e_,  &d_,    &kt_,  &z_, &st_, &vec_};
  size_t total = 0;
  for (size_t sz : sizes) total += (sz + 15) / 16 * 16;  // every slice 64-byte aligned
  buf_.resize(total * sizeof(float) + packed);
  float* p = buf_.data<float>();
  for (size_t i = 0; i < std::size(slots); ++i) {
    *slots[i] = p;
    p += (sizes[i] + 15) / 16 * 16;
  }
  packed_ = reinterpret_cast<uint8_t*>(p);
}

void Chunked::run(float* S, const HeadRun& r) {
  transpose(S, dk_, dv_, dv_, st_, dk_);
  for (int64_t t0 = 0; t0 < r.n; t0 += chunk_) chunk(r, t0, std::min(chunk_, r.n - t0));
  transpose(st_, dv_, dk_, dk_, S, dv_);
}

// One chunk of c tokens from the state S0 (held transposed in st_). With gamma_t the product of
// the decays of tokens 0..t and G[t][s] = gamma_t / gamma_s (s <= t), unrolling the recurrence
//   S_t = gamma_t S0 + sum_{s<=t} G[t][s] k_s d_s^T
// turns d_t = beta_t (v_t - decay_t S_{t-1}^T k_t) into the unit lower-triangular system
//   (I + L) D = E,  L[t][s] = beta_t G[t][s] k_t.k_s (s < t),
//   E_t = beta_t (v_t - gamma_t S0^T k_t)
// (the UT transform: D = T E with T = (I + L)^-1), and then
//   o_t = gamma_t S0^T q_t + sum_{s<=t} G[t][s] (q_t.k_s) d_s,
//   S_c = gamma_{c-1} S0 + sum_s G[c-1][s] k_s d_s^T.
// Everything on the value side is kept transposed ((dv, c)) so that each product is an
// activation (dv rows) times a packed (c or dk rows) operand.
void Chunked::chunk(const HeadRun& r, int64_t t0, int64_t c) {
  const int64_t dk = dk_, dv = dv_;
  const float* decay = r.decay + t0 * r.ld_gate;
  const float* beta = r.beta + t0 * r.ld_gate;
  for (int64_t t = 0; t < c; ++t) {
    std::memcpy(kq_ + t * dk, r.k + (t0 + t) * r.ld_in, sizeof(float) * dk);
    std::memcpy(kq_ + (c + t) * dk, r.q + (t0 + t) * r.ld_in, sizeof(float) * dk);
  }
  const float* q = kq_ + c * dk;
  // The Gram matrices [K; Q] K^T and S0^T k_s share the packed K; then S0^T q_t.
  K::pack(K::WType::F32, kq_, c, dk, 0, c, packed_);
  K::matmul(K::WType::F32, packed_, c, dk, 0, c, kq_, 2 * c, gram_, c);
  K::matmul(K::WType::F32, packed_, c, dk, 0, c, st_, dv, ks0_, c);
  matmul_nt(q, c, dk, st_, dv, qs0_, c, packed_);

  // G (products of decays, no logarithms: an underflow is a clean 0), L and the masked Q K^T.
  for (int64_t t = 0; t < c; ++t) {
    float* g = gam_ + t * c;
    const float dt = decay[t * r.ld_gate];
    for (int64_t s = 0; s < t; ++s) g[s] = gam_[(t - 1) * c + s] * dt;
    g[t] = 1.0f;
    float* a = aq_ + t * c;
    for (int64_t s = 0; s <= t; ++s) a[s] = g[s] * gram_[(c + t) * c + s];
    for (int64_t s = t + 1; s < c; ++s) a[s] = 0.0f;
  }
  // T = (I + L)^-1 by forward substitution, row t: T_t = e_t - sum_{s<t} L[t][s] T_s.
  for (int64_t t = 0; t < c; ++t) {
    float* row = t_ + t * c;
    std::fill(row, row + c, 0.0f);
    const float bt = beta[t * r.ld_gate];
    for (int64_t s = 0; s < t; ++s)
      K::axpy_f32(-bt * gam_[t * c + s] * gram_[t * c + s], t_ + s * c, row, s + 1);
    row[t] = 1.0f;
  }
  // gamma_t and beta_t as vectors; G[c-1][s] is gam_'s last row.
  float* gamma = vec_;
  float* bv = vec_ + c;
  const float* gl = gam_ + (c - 1) * c;
  for (int64_t t = 0; t < c; ++t) {
    gamma[t] = gam_[t * c] * decay[0];
    bv[t] = beta[t * r.ld_gate];
  }
  // E^T = (beta (V - gamma K S0))^T, then D^T = (T E)^T.
  transpose(r.v + t0 * r.ld_in, c, dv, r.ld_in, e_, c);
  for (int64_t j = 0; j < dv; ++j) {
    float* e = e_ + j * c;
    const float* ks = ks0_ + j * c;
    for (int64_t s = 0; s < c; ++s) e[s] = bv[s] * (e[s] - gamma[s] * ks[s]);
  }
  matmul_nt(t_, c, c, e_, dv, d_, c, packed_);
  // Outputs: the intra-chunk part (Aq D)^T into e_, plus the inter-chunk gamma_t S0^T q_t.
  matmul_nt(aq_, c, c, d_, dv, e_, c, packed_);
  for (int64_t j = 0; j < dv; ++j) {
    float* e = e_ + j * c;
    const float* qs = qs0_ + j * c;
    for (int64_t t = 0; t < c; ++t) e[t] += gamma[t] * qs[t];
  }
  transpose(e_, dv, c, c, r.out + t0 * r.ld_out, r.ld_out);
  // The state: S_c^T = gamma_{c-1} S0^T + D^T Kd with Kd_s = G[c-1][s] k_s.
  transpose(kq_, c, dk, dk, kt_, c);
  for (int64_t i = 0; i < dk; ++i) {
    float* k = kt_ + i * c;
    for (int64_t s = 0; s < c; ++s) k[s] *= gl[s];
  }
  matmul_nt(kt_, dk, c, d_, dv, z_, dk, packed_);
  K::scale_f32(st_, gamma[c - 1], dv * dk);
  K::add_f32(st_, z_, st_, dv * dk);
}

}  // namespace krafla::delta

namespace krafla::delta {

Block::Block(const ModelConfig& c, int n_batch, Matmuls& mm, int chunk)
    : c_(c), mm_(mm), chunk_(chunk) {
  const size_t B = n_batch, conv = c.lin_conv_dim(), vd = size_t(c.lin_v_heads) * c.lin_v_dim;
  qkv_.resize(B * conv * sizeof(float));
  conv_.resize(B * conv * sizeof(float));
  z_.resize(B * vd * sizeof(float));
  o_.resize(B * vd * sizeof(float));
  beta_.resize(B * c.lin_v_heads * sizeof(float));
  decay_.resize(B * c.lin_v_heads * sizeof(float));
  if (chunk_ > 0) {
    chunked_.reserve(mm.pool().size());
    for (int i = 0; i < mm.pool().size(); ++i)
      chunked_.emplace_back(c.lin_k_dim, c.lin_v_dim, chunk_);
  }
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
// each. Token by token unless chunk_ asks for Chunked on long runs (measured slower on Zen 5,
// delta.h).
void Block::recur(int layer, std::span<const Rows> seqs) {
  const int64_t C = c_.lin_conv_dim(), nk = c_.lin_k_heads, nv = c_.lin_v_heads;
  const int64_t dk = c_.lin_k_dim, dv = c_.lin_v_dim, kd = nk * dk, vd = nv * dv;
  const int64_t group = nv / nk;
  mm_.pool().split(int64_t(seqs.size()) * nv, [&](int thread, int64_t u0, int64_t u1) {
    for (int64_t u = u0; u < u1; ++u) {
      const Rows& s = seqs[u / nv];
      const int64_t hv = u % nv, hk = hv / group;
      const float* row = conv_.data<float>() + s.row0 * C;
      float* S = s.state->ssm(layer) + hv * dk * dv;
      const HeadRun r{row + hk * dk,
                      row + kd + hk * dk,
                      row + 2 * kd + hv * dv,
                      C,
                      decay_.data<float>() + s.row0 * nv + hv,
                      beta_.data<float>() + s.row0 * nv + hv,
                      nv,
                      o_.data<float>() + s.row0 * vd + hv * dv,
                      vd,
                      s.n};
      if (chunk_ > 0 && s.n >= chunk_) {
        chunked_[thread].run(S, r);
      } else {
        recurrent(S, r, dk, dv);
      }
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
