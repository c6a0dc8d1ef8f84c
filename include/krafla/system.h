// What the build is and what the CPU has: for --version lines, benchmarks and the CPU guard.
#pragma once
#include <cstdint>

namespace krafla {

const char* version();  // the library's version, "0.1.0"
// The kernel ISA this build was configured for (-DKRAFLA_ISA): "avx512vnni", "neon", ...
const char* isa_name();
// The first CPU feature the build's kernels need that this CPU lacks ("avx512vnni"), or
// nullptr when it has them all. Model::load refuses to run without them (krafla::Error).
const char* missing_cpu_feature();
// The kernels' f32 dot product of n values: the vector loads the decode kernels stream with
// (ml_bench's read-bandwidth probe).
float dot_f32(const float* a, const float* b, int64_t n);

}  // namespace krafla
