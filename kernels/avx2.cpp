// AVX2 (+FMA, F16C) kernels: the AVX2-class table of avx2_table.h with the vpmaddubsw/vpmaddwd
// block dot (Q8_0 weights packed as they are, sign moved to the activation; corr = 8*sum(a)
// for Q4_0 only).
#include "kernels/avx2_table.h"

namespace krafla::kernels {

KRAFLA_AVX2_CLASS_ENTRIES("avx2", false)

}  // namespace krafla::kernels
