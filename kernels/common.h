// Helpers shared by every kernel TU. Everything here is defined out of line in common.cpp, which
// is compiled with baseline flags: an inline definition would be emitted by the ISA TUs too and
// the linker could pick their (AVX-512) copy for baseline callers such as the CPU guard.
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace krafla::kernels {

// Exact IEEE binary16 -> binary32 (every half, subnormals, inf and NaN; NaNs are quieted the
// way F16C's vcvtph2ps quiets them, so scalar and SIMD agree bit for bit).
float f16_bits_to_f32(uint16_t h);
// binary32 -> binary16, round to nearest even, overflow to inf, NaN stays NaN (payload
// truncated, quiet bit set: what F16C's vcvtps2ph does).
uint16_t f32_to_f16_bits(float f);

// nullptr when the running CPU and OS support `isa` ("scalar", "sse2", "sse41", "avx2",
// "avxvnni", "avx512vnni"), else the short name of the first missing feature ("sse4.1",
// "avx", "avxvnni", ...). Uses cpuid/xgetbv only.
// On Arm ("neon32", "neon", "dotprod", "i8mm", "sve") it reads Linux's AT_HWCAP/AT_HWCAP2 bits
// and names features as /proc/cpuinfo does ("asimddp", "i8mm", "sve", "vfpv4").
const char* cpu_missing_for(const char* isa);

// quantize_act's F32/F16 case (their matmuls take the activations as floats): copies the row and
// returns true; false for the quantized types.
bool copy_float_act(WType t, const float* x, int64_t cols, void* dst);

// dequantize_row and quantize_row_q8_0 for an ISA without kernels of its own for them: F16
// rows through the ISA's f16_to_f32, the rest through scalar.cpp's (both exact).
#define KRAFLA_SCALAR_ROW_ENTRIES()                                                       \
  void dequantize_row(WType t, const void* src, float* dst, int64_t cols) {               \
    if (t == WType::F16) return f16_to_f32(static_cast<const uint16_t*>(src), dst, cols); \
    scalar::dequantize_row(t, src, dst, cols);                                            \
  }                                                                                       \
  void quantize_row_q8_0(const float* x, BlockQ8_0* dst, int64_t cols) {                  \
    scalar::quantize_row_q8_0(x, dst, cols);                                              \
  }

}  // namespace krafla::kernels
