#include "ops/attention.h"

#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace krafla {

void attend_head(const float* q, const float* k, const float* v, int64_t n_keys,
                 int64_t head_dim, int64_t row_stride, float scale, float softcap, float* scores,
                 float* out) {
  namespace K = kernels;
  for (int64_t j = 0; j < n_keys; ++j) scores[j] = K::dot_f32(q, k + j * row_stride, head_dim) * scale;
  if (softcap > 0)
    for (int64_t j = 0; j < n_keys; ++j) scores[j] = softcap * std::tanh(scores[j] / softcap);
  K::softmax(scores, n_keys);
  std::memset(out, 0, sizeof(float) * head_dim);
  for (int64_t j = 0; j < n_keys; ++j) K::axpy_f32(scores[j], v + j * row_stride, out, head_dim);
}

}  // namespace krafla
