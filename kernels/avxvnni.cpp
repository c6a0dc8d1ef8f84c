// AVX-VNNI (VEX vpdpbusd on ymm, with AVX2, FMA, F16C) kernels: the AVX2-class table of
// avx2_table.h with one vpdpbusd per 4-byte group. The weights are its unsigned operand: Q4_0
// nibbles as they are (corr = 8*sum(a)), Q8_0 packed xor 0x80 = w + 128 (corr = 128*sum(a)).
#include "kernels/avx2_table.h"

namespace krafla::kernels {

const char* isa_name() { return "avxvnni"; }
const char* missing_cpu_feature() { return cpu_missing_for("avxvnni"); }

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  L::pack(t, src, rows, cols, r0, r1, 0x80, dst);
}

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  avx2::quantize_act_impl(t, x, cols, dst, 128);
}

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  tiled::matmul<avx2::Avx2<true>>(t, packed, cols, r0, r1, act, n_tok, out, ld_out);
}

}  // namespace krafla::kernels
