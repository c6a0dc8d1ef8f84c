#include "ops/attention.h"

#include <cmath>
#include <cstring>

#include "kernels/kernels.h"

namespace krafla {

void attend_group(const float* q, int group, const float* k, const float* v, int64_t n_keys,
                  int64_t head_dim, int64_t row_stride, float scale, float softcap, float* scores,
                  float* out) {
  namespace K = kernels;
  for (int64_t j = 0; j < n_keys; ++j)  // K row j, while in L1, for every head of the group
    for (int g = 0; g < group; ++g)
      scores[g * n_keys + j] = K::dot_f32(q + g * head_dim, k + j * row_stride, head_dim) * scale;
  for (int g = 0; g < group; ++g) {
    float* s = scores + g * n_keys;
    if (softcap > 0)
      for (int64_t j = 0; j < n_keys; ++j) s[j] = softcap * std::tanh(s[j] / softcap);
    K::softmax(s, n_keys);
  }
  std::memset(out, 0, sizeof(float) * head_dim * group);
  for (int64_t j = 0; j < n_keys; ++j)  // likewise V row j
    for (int g = 0; g < group; ++g)
      K::axpy_f32(scores[g * n_keys + j], v + j * row_stride, out + g * head_dim, head_dim);
}

}  // namespace krafla
