// ARMv7-A NEON kernels (32-bit, hard float, VFPv4 for fused multiply-add and f16 conversion):
// the NEON table of arm_neon_table.h, whose ARMv7 paths replace what AArch64 adds (vaddvq,
// vpaddq, vrndnq, vdivq), with the plain block dot (vmull_s8 + vpadalq_s16): no sdot here.
#include "kernels/arm_neon_table.h"

namespace krafla::kernels {

KRAFLA_ARM_ENTRIES("neon32", false, arm::MullDot)

}  // namespace krafla::kernels
