// Shared helpers for the kernel tests: random inputs and double-precision references.
#pragma once
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/common.h"
#include "kernels/kernels.h"

namespace krafla::kernels::test {

inline std::vector<float> random_floats(std::mt19937& rng, int64_t n, float lo, float hi) {
  std::uniform_real_distribution<float> u(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = u(rng);
  return v;
}

// Stored (ggml-layout) bytes of a random rows x cols matrix of type t.
inline std::vector<uint8_t> random_weights(std::mt19937& rng, WType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> w(row_bytes(t, cols) * rows);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::uniform_int_distribution<int> q8(-128, 127), q4(0, 15), byte(0, 255);
  const int64_t nb = cols / kQBlock;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* row = w.data() + r * row_bytes(t, cols);
    switch (t) {
      case WType::F32:
        for (int64_t c = 0; c < cols; ++c) reinterpret_cast<float*>(row)[c] = u(rng);
        break;
      case WType::F16:
        for (int64_t c = 0; c < cols; ++c)
          reinterpret_cast<uint16_t*>(row)[c] = f32_to_f16_bits(u(rng));
        break;
      case WType::Q8_0:
        for (int64_t b = 0; b < nb; ++b) {
          auto& blk = reinterpret_cast<BlockQ8_0*>(row)[b];
          blk.d = f32_to_f16_bits(0.001f + 0.01f * std::fabs(u(rng)));
          for (auto& q : blk.qs) q = int8_t(q8(rng));  // includes -128 (ggml never makes it)
        }
        break;
      case WType::Q4_0:
      case WType::IQ4_NL:  // the same bytes; IQ4_NL's nibbles index its levels
        for (int64_t b = 0; b < nb; ++b) {
          auto& blk = reinterpret_cast<BlockQ4_0*>(row)[b];
          blk.d = f32_to_f16_bits(0.001f + 0.01f * std::fabs(u(rng)));
          for (auto& q : blk.qs) q = uint8_t(q4(rng) | (q4(rng) << 4));
        }
        break;
      case WType::Q4_M:  // offsets of either sign, up to ~8 steps: Q4_K's mins lie there
        for (int64_t b = 0; b < nb; ++b) {
          auto& blk = reinterpret_cast<BlockQ4_M*>(row)[b];
          const float d = 0.001f + 0.01f * std::fabs(u(rng));
          blk.d = f32_to_f16_bits(d);
          blk.m = f32_to_f16_bits(8.0f * d * u(rng));
          for (auto& q : blk.qs) q = uint8_t(q4(rng) | (q4(rng) << 4));
        }
        break;
      case WType::Q5_M:  // as Q4_M's, offsets up to ~16 steps
        for (int64_t b = 0; b < nb; ++b) {
          auto& blk = reinterpret_cast<BlockQ5_M*>(row)[b];
          const float d = 0.001f + 0.01f * std::fabs(u(rng));
          blk.d = f32_to_f16_bits(d);
          blk.m = f32_to_f16_bits(16.0f * d * u(rng));
          for (auto& q : blk.qs) q = uint8_t(byte(rng));
          for (auto& q : blk.qh) q = uint8_t(byte(rng));
        }
        break;
      case WType::Q3_H:  // scales of either sign (Q3_K's are 6-bit codes - 32 times d)
        for (int64_t b = 0; b < nb; ++b) {
          auto& blk = reinterpret_cast<BlockQ3_H*>(row)[b];
          for (auto& d : blk.d) d = f32_to_f16_bits(0.05f * u(rng));
          for (auto& q : blk.qs) q = uint8_t(byte(rng));
          for (auto& q : blk.qh) q = uint8_t(byte(rng));
        }
        break;
      case WType::Q6_H:  // scales of either sign (Q6_K's are int8 times d)
        for (int64_t b = 0; b < nb; ++b) {
          auto& blk = reinterpret_cast<BlockQ6_H*>(row)[b];
          for (auto& d : blk.d) d = f32_to_f16_bits(0.02f * u(rng));
          for (auto& q : blk.qs) q = uint8_t(byte(rng));
          for (auto& q : blk.qh) q = uint8_t(byte(rng));
        }
        break;
    }
  }
  return w;
}

inline const char* type_name(WType t) {
  switch (t) {
    case WType::F32:
      return "F32";
    case WType::F16:
      return "F16";
    case WType::Q8_0:
      return "Q8_0";
    case WType::Q4_0:
      return "Q4_0";
    case WType::Q4_M:
      return "Q4_M";
    case WType::Q6_H:
      return "Q6_H";
    case WType::Q5_M:
      return "Q5_M";
    case WType::IQ4_NL:
      return "IQ4_NL";
    case WType::Q3_H:
      return "Q3_H";
  }
  return "?";
}

}  // namespace krafla::kernels::test
