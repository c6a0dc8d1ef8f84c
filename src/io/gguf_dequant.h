// Decoding of the GGUF block types this build has no kernels for: Q4_1, Q5_0, Q5_1 (32-value
// blocks) and the K-quants Q4_K, Q5_K, Q6_K (256-value super-blocks), as ggml lays them out.
// gguf_import.cpp rewrites Q4_1 and Q4_K as Q4_M (4-bit, the same values up to f16 rounding of
// each 32 values' scale and offset) and requantizes the others to Q8_0 at load (docs/gguf.md
// says what it costs).
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace krafla {

// Whether gguf_to_q4_m() takes ggml type `type` (Q4_1, Q4_K).
bool gguf_has_q4_m(uint32_t type);
// n values (a multiple of the type's block) from src to n / 32 Q4_M blocks: per 32 values, the
// scale d and the value at nibble 8, m = d·8 + min, each rounded to f16 once.
void gguf_to_q4_m(uint32_t type, const uint8_t* src, kernels::BlockQ4_M* dst, int64_t n);

// Whether dequantize_row() knows ggml type `type`.
bool gguf_can_dequantize(uint32_t type);
// n values (a multiple of the type's block) from src to dst.
void gguf_dequantize_row(uint32_t type, const uint8_t* src, float* dst, int64_t n);

}  // namespace krafla
