// The kernel table: the only meeting point of models and ISAs (see ../shared/design.md).
// Plain functions on plain pointers and sizes. kernels/scalar.cpp defines every function in
// namespace krafla::kernels::scalar (always compiled: the readable specification and the test
// oracle); exactly one kernels/<isa>.cpp, chosen by -DKRAFLA_ISA, defines them in
// namespace krafla::kernels, which is what the library calls.
#pragma once
#include <cstddef>
#include <cstdint>

namespace krafla::kernels {

// Weight storage types. Values are stable (used in the pack cache later).
// Q4_M, Q6_H and Q5_M are Krafla's own, made at load from GGUF files: Q4_M is Q4_0 with a
// per-block offset, the form GGUF's Q4_1 and Q4_K rows take (their per-32 scale and min) so that
// they run at 4 bits instead of being widened to Q8_0; Q6_H holds GGUF's Q6_K rows (6 bits, a
// scale per 16 values) at 7 bits a value and Q5_M the Q5_0, Q5_1 and Q5_K rows (5 bits, a scale
// and an offset per 32) at 6, Q3_H GGUF's Q3_K rows (3 bits, a scale per 16 values) at 4, on the
// ISAs whose matmul takes them (takes(), below). IQ4_NL is GGUF's own block (and IQ4_XS's
// sub-blocks, each scale made f16): 4-bit indexes into a fixed table of 16 non-uniform int8
// levels.
enum class WType : int {
  F32 = 0,
  F16 = 1,
  Q8_0 = 2,
  Q4_0 = 3,
  Q4_M = 4,
  Q6_H = 5,
  Q5_M = 6,
  IQ4_NL = 7,
  Q3_H = 8
};
constexpr int kWTypes = 9;  // the number of WTypes (arrays indexed by one)
constexpr const char* kWTypeNames[kWTypes] = {"f32",  "f16",  "q8_0",   "q4_0", "q4_m",
                                              "q6_h", "q5_m", "iq4_nl", "q3_h"};

constexpr int kQBlock = 32;  // elements per quantized block (every type but F32 and F16)

// ggml-compatible blocks, exactly as stored in the .mlb file.
struct BlockQ8_0 {
  uint16_t d;     // f16 scale
  int8_t qs[32];  // value = d * qs[i]
};
struct BlockQ4_0 {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // byte j: element j (low nibble), element j+16 (high nibble); value = d*(n-8)
};
struct BlockQ4_M {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 offset
  uint8_t qs[16];  // as BlockQ4_0's; value = d*(n-8) + m
};
// Q6_H: value = d[h] * (q - 32) for element e of half h = e / 16, q = 0..63: its low 4 bits
// are element e's nibble in qs (as BlockQ4_0's), its top 2 bits are bits 2k, 2k+1 of
// qh[4h + j] where e = 16h + 4k + j (k, j = 0..3), the order the tiled dots unpack them in.
struct BlockQ6_H {
  uint16_t d[2];   // f16 scales of elements 0..15 and 16..31
  uint8_t qs[16];  // low nibbles
  uint8_t qh[8];   // top two bits
};
// Q5_M: value = d * (q - 16) + m, q = 0..31: its low 4 bits are element e's nibble in qs (as
// BlockQ4_0's), its top bit is bit k of qh[j] for e = 4k + j and bit 4 + k for e = 16 + 4k + j
// (k, j = 0..3), the order the tiled dots unpack them in.
struct BlockQ5_M {
  uint16_t d;      // f16 scale
  uint16_t m;      // f16 offset
  uint8_t qs[16];  // low nibbles
  uint8_t qh[4];   // top bits
};
// IQ4_NL: value = d * kIq4Levels[n] for the nibble n of each element, laid out as BlockQ4_0's.
struct BlockIQ4_NL {
  uint16_t d;      // f16 scale
  uint8_t qs[16];  // byte j: element j (low nibble), element j+16 (high nibble)
};
constexpr int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                   1,    13,   25,  38,  53,  69,  89,  113};
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_M) == 20 &&
              sizeof(BlockQ6_H) == 28 && sizeof(BlockQ5_M) == 24 && sizeof(BlockIQ4_NL) == 18);
// The 6-bit value q of element e (0..31) of a Q6_H block.
constexpr int q6_h_value(const BlockQ6_H& b, int e) {
  const int h = e / 16, k = (e % 16) / 4, j = e % 4;
  const int nib = h ? b.qs[e - 16] >> 4 : b.qs[e] & 0x0f;
  return nib | (((b.qh[4 * h + j] >> (2 * k)) & 3) << 4);
}

// Q3_H: value = d[h] * (q - 4) for element e = 16h + 4k + j (k, j = 0..3), q = 0..7: its low 2
// bits are bits 2k, 2k+1 of qs[4h + j], its top bit is bit 4h + k of qh[j], the order the tiled
// dots unpack them in.
struct BlockQ3_H {
  uint16_t d[2];  // f16 scales of elements 0..15 and 16..31
  uint8_t qs[8];  // low two bits
  uint8_t qh[4];  // top bits
};
static_assert(sizeof(BlockQ3_H) == 16);
// The 3-bit value q of element e (0..31) of a Q3_H block.
constexpr int q3_h_value(const BlockQ3_H& b, int e) {
  const int h = e / 16, k = (e % 16) / 4, j = e % 4;
  return ((b.qs[4 * h + j] >> (2 * k)) & 3) | (((b.qh[j] >> (4 * h + k)) & 1) << 2);
}

// The 4-bit types: one nibble dot serves both (Q4_M adds m * (d_a * sum of the activations)).
constexpr bool is_q4(WType t) { return t == WType::Q4_0 || t == WType::Q4_M; }
// The types stored as 16 nibble bytes per block (element j low, j + 16 high), whose tiled
// records keep Q4_0's 4 nibble vectors.
constexpr bool is_nibble(WType t) { return is_q4(t) || t == WType::IQ4_NL; }
// The 5-bit value q of element e (0..31) of a Q5_M block.
constexpr int q5_m_value(const BlockQ5_M& b, int e) {
  const int h = e / 16, k = (e % 16) / 4, j = e % 4;
  const int nib = h ? b.qs[e - 16] >> 4 : b.qs[e] & 0x0f;
  return nib | (((b.qh[j] >> (4 * h + k)) & 1) << 4);
}
// Bytes before a stored quantized block's quants: f16 d, and Q4_M's / Q5_M's f16 m (Q6_H, Q3_H:
// their two d).
constexpr int quants_offset(WType t) {
  return t == WType::Q4_M || t == WType::Q6_H || t == WType::Q5_M || t == WType::Q3_H ? 4 : 2;
}

// Bytes of one stored (unpacked, ggml-layout) row of `cols` elements.
size_t row_bytes(WType t, int64_t cols);

#define KRAFLA_KERNEL_TABLE                                                                        \
  /* "scalar", "avx2", ... */                                                                      \
  const char* isa_name();                                                                          \
  /* nullptr when the running CPU (and OS) supports this build's ISA, else the name of the         \
     first missing feature, e.g. "avx512vnni". Must itself use only baseline instructions. */      \
  const char* missing_cpu_feature();                                                               \
  /* Whether pack/matmul take weights of type t: every type but Q6_H, Q5_M, Q3_H and IQ4_NL        \
     everywhere, those where this ISA has their dots (the loader makes Q8_0 of GGUF's rows         \
     elsewhere).                                                                                   \
   */                                                                                              \
  bool takes(WType t);                                                                             \
                                                                                                   \
  /* ---- weight packing (done once at load) ---- */                                               \
  /* Rows are packed in tiles of row_tile() rows; matmul row ranges start at multiples of it.      \
     Partial last tiles are allowed (rows need not be a multiple). Tiles lie in row order, so for  \
     r a multiple of row_tile(), packed_size(t, r, cols) is where row r's tile starts: rows from   \
     r on pack as a matrix of their own there. */                                                  \
  int row_tile();                                                                                  \
  size_t packed_size(WType t, int64_t rows, int64_t cols);                                         \
  /* Pack rows [r0, r1) of `src` (row-major stored layout, the whole matrix) into `dst` (the       \
     whole packed matrix, packed_size bytes). r0 is a multiple of row_tile(); r1 is too or ==      \
     rows. Disjoint ranges may be packed concurrently. */                                          \
  void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1,          \
            void* dst);                                                                            \
                                                                                                   \
  /* ---- activations ---- */                                                                      \
  /* Bytes of one activation row (cols elements) prepared for weights of type t: for F32/F16       \
     weights the activation stays F32; for Q8_0/Q4_0/Q4_M it is quantized to Q8 blocks in whatever \
     form this ISA's dot product wants (e.g. with block sums). */                                  \
  size_t act_row_size(WType t, int64_t cols);                                                      \
  void quantize_act(WType t, const float* x, int64_t cols, void* dst);                             \
                                                                                                   \
  /* ---- matrix multiply ---- */                                                                  \
  /* out[tok*ld_out + r] = sum_c W[r][c] * X[tok][c]  for r in [r0, r1), tok in [0, n_tok).        \
     `act` holds n_tok rows of act_row_size(t, cols) bytes. The value written for each             \
     (r, tok) is bitwise the same whatever n_tok, r0 and r1 are (batch and thread                  \
     independence). r0 is a multiple of row_tile(). */                                             \
  void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,     \
              const void* act, int64_t n_tok, float* out, int64_t ld_out);                         \
                                                                                                   \
  /* ---- conversions on the stored (unpacked) layout ---- */                                      \
  void dequantize_row(WType t, const void* src, float* dst, int64_t cols);                         \
  void quantize_row_q8_0(const float* x, BlockQ8_0* dst, int64_t cols);                            \
  void f16_to_f32(const uint16_t* x, float* y, int64_t n);                                         \
  void f32_to_f16(const float* x, uint16_t* y, int64_t n);                                         \
                                                                                                   \
  /* ---- vector ops (F32) ---- */                                                                 \
  /* out = x / sqrt(mean(x^2) + eps) * w; out may alias x. */                                      \
  void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n);                  \
  float dot_f32(const float* a, const float* b, int64_t n);                                        \
  /* y += a * x */                                                                                 \
  void axpy_f32(float a, const float* x, float* y, int64_t n);                                     \
  /* Attention's two row loops over g query rows (q + i*d), with the arithmetic of the calls       \
     they replace whatever g is: out[i*ld_out + j] = dot_f32(q + i*d, k + j*d, d) * scale for      \
     j < n (n contiguous key rows), and out[i*d ..) += w[i*ld_w + j] * v[j*d .. j*d+d) for         \
     j = 0..n-1 in order, as n axpy_f32 calls. */                                                  \
  void dot_rows_f32(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale,  \
                    float* out, int64_t ld_out);                                                   \
  void axpy_rows_f32(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n,           \
                     int64_t d, float* out);                                                       \
  /* The same two loops on rows of IEEE halves (an F16 KV cache's), bitwise f16_to_f32 of the      \
     rows followed by the F32 loop. buf: room for n*d floats, which an ISA may convert the rows    \
     into first. */                                                                                \
  void dot_rows_f16(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d,            \
                    float scale, float* out, int64_t ld_out, float* buf);                          \
  void axpy_rows_f16(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n,        \
                     int64_t d, float* out, float* buf);                                           \
  void scale_f32(float* x, float s, int64_t n);                                                    \
  /* One token of the gated delta rule on one head's state S [dk][dv] (row i: key dim i):          \
       S *= decay;  d = beta * (v - S^T k);  S += k d^T;  out = S^T q   (out: dv floats). */       \
  void delta_step(float* S, const float* q, const float* k, const float* v, float decay,           \
                  float beta, int64_t dk, int64_t dv, float* out);                                 \
  void add_f32(const float* a, const float* b, float* out, int64_t n); /* out may alias */         \
  /* x = exp(x - max) / sum; returns the sum before normalisation */                               \
  float softmax(float* x, int64_t n);                                                              \
  /* out = silu(gate) * up */                                                                      \
  void swiglu(const float* gate, const float* up, float* out, int64_t n);                          \
  /* out = gelu_tanh(gate) * up */                                                                 \
  void geglu(const float* gate, const float* up, float* out, int64_t n);                           \
  /* rotate_half RoPE on n_heads heads of head_dim floats (contiguous): for i < rot/2,             \
     (x[i], x[i+rot/2]) rotated by (cos[i], sin[i]). Elements >= rot are left alone. */            \
  void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos,        \
            const float* sin);

KRAFLA_KERNEL_TABLE

namespace scalar {
KRAFLA_KERNEL_TABLE
}

}  // namespace krafla::kernels
