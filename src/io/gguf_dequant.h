// Decoding of the GGUF block types this build has no kernels for: Q4_1, Q5_0, Q5_1, IQ4_NL
// (32-value blocks) and the K-quants Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS (256-value
// super-blocks), as ggml lays them out.
// gguf_import.cpp rewrites Q4_1 and Q4_K as Q4_M (4-bit, the same values up to f16 rounding of
// each 32 values' scale and offset), Q6_K as Q6_H where the ISA takes it (6-bit, the same values
// up to f16 rounding of each 16 values' scale), Q5_0, Q5_1 and Q5_K as Q5_M likewise (5-bit) and
// Q3_K as Q3_H (3-bit, the same values up to f16 rounding of each 16 values' scale) where the
// ISA takes it (every ISA that takes Q6_H), IQ4_NL and IQ4_XS as IQ4_NL (IQ4_XS's sub-blocks
// with their scales rounded to f16; as Q8_0 where the ISA lacks IQ4_NL, whose levels are int8
// quants: exact up to the same rounding), and requantizes Q2_K (and the others where the ISA lacks
// their type) to Q8_0 at load (docs/gguf.md says what it costs).
#pragma once
#include <cstdint>

#include "kernels/kernels.h"

namespace krafla {

// Whether gguf_to_q4_m() takes ggml type `type` (Q4_1, Q4_K).
bool gguf_has_q4_m(uint32_t type);
// n values (a multiple of the type's block) from src to n / 32 Q4_M blocks: per 32 values, the
// scale d and the value at nibble 8, m = d·8 + min, each rounded to f16 once.
void gguf_to_q4_m(uint32_t type, const uint8_t* src, kernels::BlockQ4_M* dst, int64_t n);

// Whether gguf_to_q5_m() takes ggml type `type` (Q5_0, Q5_1, Q5_K) and this build's kernels
// take Q5_M.
bool gguf_has_q5_m(uint32_t type);
// n values (a multiple of the type's block) from src to n / 32 Q5_M blocks: per 32 values, the
// scale d and the value at q = 16, m = d·16 + min, each rounded to f16 once (Q5_0: m = 0).
void gguf_to_q5_m(uint32_t type, const uint8_t* src, kernels::BlockQ5_M* dst, int64_t n);

// n values (a multiple of 256) of Q6_K from src to n / 32 Q6_H blocks: the same 6-bit values, each
// 16 values' scale d·scale rounded to f16 once.
void gguf_q6_k_to_q6_h(const uint8_t* src, kernels::BlockQ6_H* dst, int64_t n);
// Q3_K to Q3_H blocks: the same 3-bit values as q (0..7), each 16 values' d·(scale − 32)
// rounded to f16 once.
void gguf_q3_k_to_q3_h(const uint8_t* src, kernels::BlockQ3_H* dst, int64_t n);

// What a matrix of ggml type `type` (one gguf_can_dequantize takes) runs as: Q4_M for Q4_1 and
// Q4_K, Q3_H for Q3_K, Q6_H for Q6_K, Q5_M for Q5_0, Q5_1, Q5_K and IQ4_NL for IQ4_NL and IQ4_XS
// where the kernels take them, Q8_0 for the others.
kernels::WType gguf_rewrite_type(uint32_t type);
// `n` rows of `cols` values from src (row after row, `in_row` bytes each) to dst, each row as
// gguf_rewrite_type's (gguf_to_q4_m, gguf_q3_k_to_q3_h, gguf_q6_k_to_q6_h, gguf_to_q5_m, IQ4's
// sub-blocks as IQ4_NL blocks or their levels as Q8_0 quants, or decoded and requantized by
// quantize_row_q8_0).
void gguf_rewrite_rows(uint32_t type, const uint8_t* src, uint64_t in_row, int64_t cols, int64_t n,
                       uint8_t* dst);

// Whether dequantize_row() knows ggml type `type`.
bool gguf_can_dequantize(uint32_t type);
// n values (a multiple of the type's block) from src to dst.
void gguf_dequantize_row(uint32_t type, const uint8_t* src, float* dst, int64_t n);

}  // namespace krafla
