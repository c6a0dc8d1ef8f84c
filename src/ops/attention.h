// Attention for one query head over a contiguous run of cached keys/values.
#pragma once
#include <cstdint>

namespace krafla {

// out[head_dim] = softmax(s_j) · V[j] for j in [0, n_keys), s_j = scale * q·K[j], or
// softcap*tanh(s_j/softcap) when softcap > 0 (Gemma 2). K and V rows are head_dim floats,
// `row_stride` floats apart. `scores` has room for n_keys floats.
void attend_head(const float* q, const float* k, const float* v, int64_t n_keys,
                 int64_t head_dim, int64_t row_stride, float scale, float softcap, float* scores,
                 float* out);

}  // namespace krafla
