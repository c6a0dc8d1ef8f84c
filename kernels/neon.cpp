// Armv8.0-A AdvSIMD kernels (every AArch64 CPU): the NEON table of arm_neon_table.h with its
// plain block dot (vmull_s8 + vpadalq_s16, pairwise sums with vpaddq) on 4-row tiles.
#include "kernels/arm_neon_table.h"

namespace krafla::kernels {

const char* isa_name() { return "neon"; }
const char* missing_cpu_feature() { return cpu_missing_for("neon"); }

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  arm::pack_tiles<false>(t, src, rows, cols, r0, r1, dst);
}

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  tiled::matmul<arm::Tiled<arm::MullDot>>(t, packed, cols, r0, r1, act, n_tok, out, ld_out);
}

}  // namespace krafla::kernels
