// Decoding of the GGUF block types this build has no kernels for: Q4_1, Q5_0, Q5_1 (32-value
// blocks) and the K-quants Q4_K, Q5_K, Q6_K (256-value super-blocks), as ggml lays them out.
// gguf_import.cpp requantizes such tensors to Q8_0 at load (docs/gguf.md says what it costs).
#pragma once
#include <cstdint>

namespace krafla {

// Whether dequantize_row() knows ggml type `type`.
bool gguf_can_dequantize(uint32_t type);
// n values (a multiple of the type's block) from src to dst.
void gguf_dequantize_row(uint32_t type, const uint8_t* src, float* dst, int64_t n);

}  // namespace krafla
