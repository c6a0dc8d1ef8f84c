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
