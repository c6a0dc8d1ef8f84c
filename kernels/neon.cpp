// Armv8.0-A AdvSIMD kernels (every AArch64 CPU): the NEON table of arm_neon_table.h with its
// plain block dot (vmull_s8 + vpadalq_s16, pairwise sums with vpaddq) on 4-row tiles.
#include "kernels/arm_neon_table.h"

namespace krafla::kernels {

KRAFLA_ARM_ENTRIES("neon", false, arm::MullDot)

}  // namespace krafla::kernels
