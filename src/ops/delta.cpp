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

void step(float* S, const float* q, const float* k, const float* v, float decay, float beta,
          int64_t dk, int64_t dv, float* tmp, float* out) {
  // Pass 1: decay the state and read what it predicts for k.
  std::memset(tmp, 0, sizeof(float) * dv);
  for (int64_t i = 0; i < dk; ++i) {
    K::scale_f32(S + i * dv, decay, dv);
    K::axpy_f32(k[i], S + i * dv, tmp, dv);
  }
  for (int64_t j = 0; j < dv; ++j) tmp[j] = beta * (v[j] - tmp[j]);
  // Pass 2: write the correction and read the output with q.
  std::memset(out, 0, sizeof(float) * dv);
  for (int64_t i = 0; i < dk; ++i) {
    K::axpy_f32(k[i], tmp, S + i * dv, dv);
    K::axpy_f32(q[i], S + i * dv, out, dv);
  }
}

}  // namespace krafla::delta
