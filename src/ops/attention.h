// Attention for the query heads that share one KV head (GQA), over a contiguous run of cached
// keys/values.
#pragma once
#include <cstdint>

namespace krafla {

// For each of the `group` query heads g (q + g*head_dim, consecutive), out[g] = softmax(s_gj) ·
// V[j] for j in [0, n_keys), s_gj = scale * q_g·K[j], or softcap*tanh(s_gj/softcap) when
// softcap > 0 (Gemma 2). K and V rows are head_dim floats, `row_stride` floats apart. `scores`
// has room for group * n_keys floats. Every query head of the group is served per key row, so
// each K/V row is read from memory once per group instead of once per head; a head's
// arithmetic (and so its result, bit for bit) is the same for any group size.
void attend_group(const float* q, int group, const float* k, const float* v, int64_t n_keys,
                  int64_t head_dim, int64_t row_stride, float scale, float softcap, float* scores,
                  float* out);

}  // namespace krafla
