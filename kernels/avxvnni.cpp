// AVX-VNNI (VEX vpdpbusd on ymm, with AVX2, FMA, F16C) kernels: the AVX2-class table of
// avx2_table.h with one vpdpbusd per 4-byte group. The weights are its unsigned operand: Q4_0
// nibbles as they are (corr = 8*sum(a)), Q8_0 packed xor 0x80 = w + 128 (corr = 128*sum(a)).
#include "kernels/avx2_table.h"

namespace krafla::kernels {

KRAFLA_AVX2_CLASS_ENTRIES("avxvnni", true)

}  // namespace krafla::kernels
