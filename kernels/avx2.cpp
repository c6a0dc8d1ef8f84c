// AVX2 (+FMA, F16C) kernels: the AVX2-class table of avx2_table.h with the vpmaddubsw/vpmaddwd
// block dot (Q8_0 weights packed as they are, sign moved to the activation; corr = 8*sum(a)
// for Q4_0 only).
#include "kernels/avx2_table.h"

namespace krafla::kernels {

const char* isa_name() { return "avx2"; }
const char* missing_cpu_feature() { return cpu_missing_for("avx2"); }

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  L::pack(t, src, rows, cols, r0, r1, 0, dst);
}

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  avx2::quantize_act_impl(t, x, cols, dst, 0);
}

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  tiled::matmul<avx2::Avx2<false>>(t, packed, cols, r0, r1, act, n_tok, out, ld_out);
}

}  // namespace krafla::kernels
