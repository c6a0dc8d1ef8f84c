// The readable specification of the kernel table (portable C++, always compiled, the oracle
// every SIMD ISA is tested against). Row tile 1: the packed weights are the stored ggml rows,
// and the quantized activation is a row of plain ggml Q8_0 blocks.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/common.h"
#include "kernels/kernels.h"

// WType lives in krafla::kernels, so calls here that pass a WType are qualified (scalar::f):
// argument-dependent lookup would otherwise also find the built ISA's table.
namespace krafla::kernels::scalar {

const char* isa_name() { return "scalar"; }
const char* missing_cpu_feature() { return nullptr; }
bool takes(WType) { return true; }

int row_tile() { return 1; }

size_t packed_size(WType t, int64_t rows, int64_t cols) { return row_bytes(t, cols) * rows; }

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  const size_t rb = row_bytes(t, cols);
  std::memcpy(static_cast<char*>(dst) + r0 * rb, static_cast<const char*>(src) + r0 * rb,
              (r1 - r0) * rb);
}

size_t act_row_size(WType t, int64_t cols) {
  if (t == WType::F32 || t == WType::F16) return size_t(cols) * 4;
  return row_bytes(WType::Q8_0, cols);
}

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  if (!copy_float_act(t, x, cols, dst))
    scalar::quantize_row_q8_0(x, static_cast<BlockQ8_0*>(dst), cols);
}

namespace {

// Q4_0 and Q4_M: the nibble dot of value d*(n-8) per block, and for Q4_M the offset m times
// the activation block's sum, acc += m * (d_a * sum(a)).
template <class Block>
float dot_q4(const Block* w, const BlockQ8_0* a, int64_t cols) {
  float acc = 0.0f;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    int32_t isum = 0, asum = 0;
    for (int j = 0; j < kQBlock / 2; ++j) {
      isum += (int32_t(w[b].qs[j] & 0x0f) - 8) * a[b].qs[j];
      isum += (int32_t(w[b].qs[j] >> 4) - 8) * a[b].qs[j + 16];
      asum += a[b].qs[j] + a[b].qs[j + 16];
    }
    const float da = f16_bits_to_f32(a[b].d);
    acc += (f16_bits_to_f32(w[b].d) * da) * float(isum);
    if constexpr (std::is_same_v<Block, BlockQ4_M>)
      acc += f16_bits_to_f32(w[b].m) * (da * float(asum));
  }
  return acc;
}

// d*(n-8), plus m for Q4_M.
template <class Block>
void dequantize_q4(const Block* w, float* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const float d = f16_bits_to_f32(w[b].d);
    float m = 0.0f;
    if constexpr (std::is_same_v<Block, BlockQ4_M>) m = f16_bits_to_f32(w[b].m);
    for (int j = 0; j < kQBlock / 2; ++j) {
      dst[b * kQBlock + j] = d * float(int(w[b].qs[j] & 0x0f) - 8) + m;
      dst[b * kQBlock + j + 16] = d * float(int(w[b].qs[j] >> 4) - 8) + m;
    }
  }
}

// Q6_H (q - 32) and Q3_H (q - 4): per half h of a block, the int dot of its 16 values
// value(block, e) - kZero scaled by d[h] * d_a.
template <class Block, int (*value)(const Block&, int), int kZero>
float dot_halves(const Block* w, const BlockQ8_0* a, int64_t cols) {
  float acc = 0.0f;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const float da = f16_bits_to_f32(a[b].d);
    for (int h = 0; h < 2; ++h) {
      int32_t isum = 0;
      for (int e = 16 * h; e < 16 * h + 16; ++e) isum += (value(w[b], e) - kZero) * a[b].qs[e];
      acc += (f16_bits_to_f32(w[b].d[h]) * da) * float(isum);
    }
  }
  return acc;
}

// The values d[h] * (value(block, e) - kZero) of dot_halves' types.
template <class Block, int (*value)(const Block&, int), int kZero>
void dequantize_halves(const Block* w, float* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / kQBlock; ++b)
    for (int e = 0; e < kQBlock; ++e)
      dst[b * kQBlock + e] = f16_bits_to_f32(w[b].d[e / 16]) * float(value(w[b], e) - kZero);
}

// Q5_M: the int dot of the values q - 16 scaled by d * d_a, plus the offset m times the activation
// block's sum, acc += m * (d_a * sum(a)) (as Q4_M).
float dot_q5_m(const BlockQ5_M* w, const BlockQ8_0* a, int64_t cols) {
  float acc = 0.0f;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    int32_t isum = 0, asum = 0;
    for (int e = 0; e < kQBlock; ++e) {
      isum += (q5_m_value(w[b], e) - 16) * a[b].qs[e];
      asum += a[b].qs[e];
    }
    const float da = f16_bits_to_f32(a[b].d);
    acc += (f16_bits_to_f32(w[b].d) * da) * float(isum);
    acc += f16_bits_to_f32(w[b].m) * (da * float(asum));
  }
  return acc;
}

// IQ4_NL: the int dot of the levels kIq4Levels[n] scaled by d * d_a (as Q8_0's).
float dot_iq4_nl(const BlockIQ4_NL* w, const BlockQ8_0* a, int64_t cols) {
  float acc = 0.0f;
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    int32_t isum = 0;
    for (int j = 0; j < kQBlock / 2; ++j) {
      isum += kIq4Levels[w[b].qs[j] & 0x0f] * a[b].qs[j];
      isum += kIq4Levels[w[b].qs[j] >> 4] * a[b].qs[j + 16];
    }
    acc += (f16_bits_to_f32(w[b].d) * f16_bits_to_f32(a[b].d)) * float(isum);
  }
  return acc;
}

// One output element. Quantized types accumulate an exact int32 dot per block and fold it into
// a float sum block by block, acc += (d_w * d_a) * isum, which every ISA mirrors.
float dot_row(WType t, const void* w_row, const void* a_row, int64_t cols) {
  float acc = 0.0f;
  switch (t) {
    case WType::F32: {
      const float* w = static_cast<const float*>(w_row);
      const float* a = static_cast<const float*>(a_row);
      for (int64_t c = 0; c < cols; ++c) acc += w[c] * a[c];
      break;
    }
    case WType::F16: {
      const uint16_t* w = static_cast<const uint16_t*>(w_row);
      const float* a = static_cast<const float*>(a_row);
      for (int64_t c = 0; c < cols; ++c) acc += f16_bits_to_f32(w[c]) * a[c];
      break;
    }
    case WType::Q8_0: {
      const BlockQ8_0* w = static_cast<const BlockQ8_0*>(w_row);
      const BlockQ8_0* a = static_cast<const BlockQ8_0*>(a_row);
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        int32_t isum = 0;
        for (int i = 0; i < kQBlock; ++i) isum += int32_t(w[b].qs[i]) * a[b].qs[i];
        acc += (f16_bits_to_f32(w[b].d) * f16_bits_to_f32(a[b].d)) * float(isum);
      }
      break;
    }
    case WType::Q4_0:
      return dot_q4(static_cast<const BlockQ4_0*>(w_row), static_cast<const BlockQ8_0*>(a_row),
                    cols);
    case WType::Q4_M:
      return dot_q4(static_cast<const BlockQ4_M*>(w_row), static_cast<const BlockQ8_0*>(a_row),
                    cols);
    case WType::Q6_H:
      return dot_halves<BlockQ6_H, q6_h_value, 32>(static_cast<const BlockQ6_H*>(w_row),
                                                   static_cast<const BlockQ8_0*>(a_row), cols);
    case WType::Q5_M:
      return dot_q5_m(static_cast<const BlockQ5_M*>(w_row), static_cast<const BlockQ8_0*>(a_row),
                      cols);
    case WType::Q3_H:
      return dot_halves<BlockQ3_H, q3_h_value, 4>(static_cast<const BlockQ3_H*>(w_row),
                                                  static_cast<const BlockQ8_0*>(a_row), cols);
    case WType::IQ4_NL:
      return dot_iq4_nl(static_cast<const BlockIQ4_NL*>(w_row),
                        static_cast<const BlockQ8_0*>(a_row), cols);
  }
  return acc;
}

}  // namespace

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  const size_t rb = row_bytes(t, cols);
  const size_t ab = scalar::act_row_size(t, cols);
  for (int64_t tok = 0; tok < n_tok; ++tok) {
    const char* a_row = static_cast<const char*>(act) + tok * ab;
    for (int64_t r = r0; r < r1; ++r) {
      out[tok * ld_out + r] = dot_row(t, static_cast<const char*>(packed) + r * rb, a_row, cols);
    }
  }
}

void dequantize_row(WType t, const void* src, float* dst, int64_t cols) {
  switch (t) {
    case WType::F32:
      std::memcpy(dst, src, size_t(cols) * 4);
      break;
    case WType::F16:
      scalar::f16_to_f32(static_cast<const uint16_t*>(src), dst, cols);
      break;
    case WType::Q8_0: {
      const BlockQ8_0* w = static_cast<const BlockQ8_0*>(src);
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        const float d = f16_bits_to_f32(w[b].d);
        for (int i = 0; i < kQBlock; ++i) dst[b * kQBlock + i] = d * float(w[b].qs[i]);
      }
      break;
    }
    case WType::Q4_0:
      return dequantize_q4(static_cast<const BlockQ4_0*>(src), dst, cols);
    case WType::Q4_M:
      return dequantize_q4(static_cast<const BlockQ4_M*>(src), dst, cols);
    case WType::Q6_H:
      return dequantize_halves<BlockQ6_H, q6_h_value, 32>(static_cast<const BlockQ6_H*>(src), dst,
                                                          cols);
    case WType::Q5_M: {
      const BlockQ5_M* w = static_cast<const BlockQ5_M*>(src);
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        const float d = f16_bits_to_f32(w[b].d), m = f16_bits_to_f32(w[b].m);
        for (int e = 0; e < kQBlock; ++e)
          dst[b * kQBlock + e] = d * float(q5_m_value(w[b], e) - 16) + m;
      }
      break;
    }
    case WType::Q3_H:
      return dequantize_halves<BlockQ3_H, q3_h_value, 4>(static_cast<const BlockQ3_H*>(src), dst,
                                                         cols);
    case WType::IQ4_NL: {
      const BlockIQ4_NL* w = static_cast<const BlockIQ4_NL*>(src);
      for (int64_t b = 0; b < cols / kQBlock; ++b) {
        const float d = f16_bits_to_f32(w[b].d);
        for (int j = 0; j < kQBlock / 2; ++j) {
          dst[b * kQBlock + j] = d * float(kIq4Levels[w[b].qs[j] & 0x0f]);
          dst[b * kQBlock + j + 16] = d * float(kIq4Levels[w[b].qs[j] >> 4]);
        }
      }
      break;
    }
  }
}

// ggml's quantize_row_q8_0: d = max|x| / 127 per block, q = round(x / d). We round half to
// even (nearbyint) because that is what the SIMD conversions do.
void quantize_row_q8_0(const float* x, BlockQ8_0* dst, int64_t cols) {
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    float amax = 0.0f;
    for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = f32_to_f16_bits(d);
    for (int i = 0; i < kQBlock; ++i) {
      const float q = std::nearbyint(xb[i] * id);
      dst[b].qs[i] = int8_t(std::clamp(q, -127.0f, 127.0f));
    }
  }
}

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f16_bits_to_f32(x[i]);
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = f32_to_f16_bits(x[i]);
}

void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float scale = 1.0f / std::sqrt(ss / float(n) + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = x[i] * scale * w[i];
}

float dot_f32(const float* a, const float* b, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += a[i] * b[i];
  return acc;
}

void axpy_f32(float a, const float* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

void dot_rows_f32(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale,
                  float* out, int64_t ld_out) {
  for (int64_t i = 0; i < g; ++i)
    for (int64_t j = 0; j < n; ++j) out[i * ld_out + j] = dot_f32(q + i * d, k + j * d, d) * scale;
}

void axpy_rows_f32(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n, int64_t d,
                   float* out) {
  for (int64_t i = 0; i < g; ++i)
    for (int64_t j = 0; j < n; ++j) axpy_f32(w[i * ld_w + j], v + j * d, out + i * d, d);
}

void dot_rows_f16(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d, float scale,
                  float* out, int64_t ld_out, float* buf) {
  f16_to_f32(k, buf, n * d);
  dot_rows_f32(q, g, buf, n, d, scale, out, ld_out);
}

void axpy_rows_f16(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n, int64_t d,
                   float* out, float* buf) {
  f16_to_f32(v, buf, n * d);
  axpy_rows_f32(w, ld_w, g, buf, n, d, out);
}

void scale_f32(float* x, float s, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

void add_f32(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

// Column by column (columns of S are independent), in strips of 8 so that the inner loops
// run along rows.
void delta_step(float* S, const float* q, const float* k, const float* v, float decay, float beta,
                int64_t dk, int64_t dv, float* out) {
  constexpr int64_t kStrip = 8;
  for (int64_t j0 = 0; j0 < dv; j0 += kStrip) {
    const int64_t w = std::min(kStrip, dv - j0);
    float p[kStrip] = {}, d[kStrip], o[kStrip] = {};
    for (int64_t i = 0; i < dk; ++i) {
      float* s = S + i * dv + j0;
      for (int64_t j = 0; j < w; ++j) {
        s[j] *= decay;
        p[j] += k[i] * s[j];
      }
    }
    for (int64_t j = 0; j < w; ++j) d[j] = beta * (v[j0 + j] - p[j]);
    for (int64_t i = 0; i < dk; ++i) {
      float* s = S + i * dv + j0;
      for (int64_t j = 0; j < w; ++j) {
        s[j] += k[i] * d[j];
        o[j] += q[i] * s[j];
      }
    }
    for (int64_t j = 0; j < w; ++j) out[j0 + j] = o[j];
  }
}

float softmax(float* x, int64_t n) {
  if (n <= 0) return 0.0f;
  float mx = x[0];
  for (int64_t i = 1; i < n; ++i) mx = std::max(mx, x[i]);
  float sum = 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - mx);
    sum += x[i];
  }
  const float inv = 1.0f / sum;
  for (int64_t i = 0; i < n; ++i) x[i] *= inv;
  return sum;
}

void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
}

// GELU, tanh approximation (what Gemma's gelu_pytorch_tanh uses).
void geglu(const float* gate, const float* up, float* out, int64_t n) {
  constexpr float kSqrt2OverPi = 0.7978845608028654f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    const float y = kSqrt2OverPi * (g + 0.044715f * g * g * g);
    out[i] = 0.5f * g * (1.0f + std::tanh(y)) * up[i];
  }
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos,
          const float* sin) {
  const int64_t half = rot_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* xh = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const float x0 = xh[i], x1 = xh[i + half];
      xh[i] = x0 * cos[i] - x1 * sin[i];
      xh[i + half] = x0 * sin[i] + x1 * cos[i];
    }
  }
}

}  // namespace krafla::kernels::scalar

#if defined(KRAFLA_ISA_SCALAR)
// The scalar build: the public table is the specification itself.
namespace krafla::kernels {
// clang-format off
const char* isa_name() { return scalar::isa_name(); }
const char* missing_cpu_feature() { return scalar::missing_cpu_feature(); }
bool takes(WType t) { return scalar::takes(t); }
int row_tile() { return scalar::row_tile(); }
size_t packed_size(WType t, int64_t rows, int64_t cols) { return scalar::packed_size(t, rows, cols); }
void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) { scalar::pack(t, src, rows, cols, r0, r1, dst); }
size_t act_row_size(WType t, int64_t cols) { return scalar::act_row_size(t, cols); }
void quantize_act(WType t, const float* x, int64_t cols, void* dst) { scalar::quantize_act(t, x, cols, dst); }
void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1, const void* act, int64_t n_tok, float* out, int64_t ld_out) { scalar::matmul(t, packed, rows, cols, r0, r1, act, n_tok, out, ld_out); }
void dequantize_row(WType t, const void* src, float* dst, int64_t cols) { scalar::dequantize_row(t, src, dst, cols); }
void quantize_row_q8_0(const float* x, BlockQ8_0* dst, int64_t cols) { scalar::quantize_row_q8_0(x, dst, cols); }
void f16_to_f32(const uint16_t* x, float* y, int64_t n) { scalar::f16_to_f32(x, y, n); }
void f32_to_f16(const float* x, uint16_t* y, int64_t n) { scalar::f32_to_f16(x, y, n); }
void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) { scalar::rmsnorm(x, w, eps, out, n); }
float dot_f32(const float* a, const float* b, int64_t n) { return scalar::dot_f32(a, b, n); }
void axpy_f32(float a, const float* x, float* y, int64_t n) { scalar::axpy_f32(a, x, y, n); }
void dot_rows_f32(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale, float* out, int64_t ld_out) { scalar::dot_rows_f32(q, g, k, n, d, scale, out, ld_out); }
void axpy_rows_f32(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n, int64_t d, float* out) { scalar::axpy_rows_f32(w, ld_w, g, v, n, d, out); }
void dot_rows_f16(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d, float scale, float* out, int64_t ld_out, float* buf) { scalar::dot_rows_f16(q, g, k, n, d, scale, out, ld_out, buf); }
void axpy_rows_f16(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n, int64_t d, float* out, float* buf) { scalar::axpy_rows_f16(w, ld_w, g, v, n, d, out, buf); }
void scale_f32(float* x, float s, int64_t n) { scalar::scale_f32(x, s, n); }
void delta_step(float* S, const float* q, const float* k, const float* v, float decay, float beta, int64_t dk, int64_t dv, float* out) { scalar::delta_step(S, q, k, v, decay, beta, dk, dv, out); }
void add_f32(const float* a, const float* b, float* out, int64_t n) { scalar::add_f32(a, b, out, n); }
float softmax(float* x, int64_t n) { return scalar::softmax(x, n); }
void swiglu(const float* gate, const float* up, float* out, int64_t n) { scalar::swiglu(gate, up, out, n); }
void geglu(const float* gate, const float* up, float* out, int64_t n) { scalar::geglu(gate, up, out, n); }
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos, const float* sin) { scalar::rope(x, n_heads, head_dim, rot_dim, cos, sin); }
// clang-format on
}  // namespace krafla::kernels
#endif
