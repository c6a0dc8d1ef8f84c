// SVE kernels, vector-length agnostic: nothing assumes a vector length, so one binary runs on
// 128- to 2048-bit implementations. The row tile is one vector of int32 lanes (row_tile() =
// svcntw(), read at run time), which makes every matmul loop a whole number of full vectors:
//  * F32/F16: a tile column is one vector; fma with the broadcast activation element.
//  * Q8_0/Q4_0/Q4_M: one record per (tile, block): kTile f16 scales, then the quants as vectors
//    of kTile dwords, dword lane r = 4 consecutive quant bytes of row r (Q8_0: 8 vectors, Q4_0
//    and Q4_M: 4, their low nibbles elements 4k.., high nibbles 16+4k..; then Q4_M's kTile f16
//    offsets, which add fma(m_w, d_a*sum(a)) per block). svdot_lane multiplies each lane
//    with activation group k of the 16 bytes svld1rq replicates into every 128-bit segment, so
//    each lane ends the block with its row's exact int32 sum: no horizontal reductions.
//    Q4_0 nibbles are packed signed (n xor 8): v << 4 and v & 0xf0 are 16x the signed nibbles.
//  * Q6_H/Q5_M: two rows of kTile f16 (Q6_H's scales of values 0-15 and 16-31, Q5_M's scale
//    and offset), 4 vectors of unsigned nibbles and the top-bit vectors (Q6_H 2, Q5_M 1), as
//    tiled.h lays them out; the dot rebuilds q - 32 or q - 16 signed, so no activation sums.
//  * Q3_H: Q6_H's record shape with 2 vectors of bit pairs and 1 of top bits; q - 4 signed.
//  * IQ4_NL: Q4_0's record with the nibbles unsigned; svtbl looks them up as signed levels.
//  * acc = fma(float(isum_b), d_w*d_a, acc) per block in the row's lane: the same bits for any
//    token grouping, row range and vector length.
// The packed layout depends on the vector length of the machine that packs; the pack cache
// (src/io/pack_cache.cpp) records row_tile() and repacks when it differs.
// Sizeless SVE types cannot form arrays, so token groups are unrolled by hand (up to 4).
#include <arm_sve.h>

#include <cmath>
#include <cstring>
#include <type_traits>

#include "kernels/common.h"
#include "kernels/kernels.h"
#include "kernels/tiled.h"
#include "kernels/vec_math.h"

namespace krafla::kernels {
namespace {

using tiled::ActBlock;
using tiled::imin;

int64_t tile_rows() { return int64_t(svcntw()); }
int64_t n_tiles(int64_t rows) { return (rows + tile_rows() - 1) / tile_rows(); }

// Bytes of a (tile, block) record: per row, the stored block's bytes.
size_t rec_bytes(WType t) { return size_t(tile_rows()) * row_bytes(t, kQBlock); }
// Where a Q4_M record's offsets start: after a Q4_0 record (scales and nibbles).
size_t q4m_offsets() { return rec_bytes(WType::Q4_0); }
// Q6_H, Q5_M and Q3_H records: two rows of kTile f16 (Q6_H's and Q3_H's two scales, Q5_M's
// scale and offset), then the quant vectors: 4 of nibbles (Q3_H: 2 of bit pairs), then top bits
// (Q6_H: 2, Q5_M, Q3_H: 1), as tiled.h's.
constexpr bool has_top_bits(WType t) {
  return t == WType::Q6_H || t == WType::Q5_M || t == WType::Q3_H;
}

size_t tile_bytes(WType t, int64_t cols) {
  switch (t) {
    case WType::F32:
      return size_t(cols) * tile_rows() * 4;
    case WType::F16:
      return size_t(cols) * tile_rows() * 2;
    case WType::Q8_0:
    case WType::Q4_0:
    case WType::Q4_M:
    case WType::Q6_H:
    case WType::Q5_M:
    case WType::IQ4_NL:
    case WType::Q3_H:
      return size_t(cols / kQBlock) * rec_bytes(t);
  }
  return 0;
}

// Row `src` (stored layout) into lane `lane` of `tile`.
void pack_row(WType t, const uint8_t* src, int64_t cols, int64_t lane, uint8_t* tile) {
  const int64_t kt = tile_rows();
  if (t == WType::F32 || t == WType::F16) {
    const int es = t == WType::F32 ? 4 : 2;
    for (int64_t c = 0; c < cols; ++c) std::memcpy(tile + (c * kt + lane) * es, src + c * es, es);
    return;
  }
  const bool q4m = t == WType::Q4_M, top = has_top_bits(t);
  const int qs = quants_offset(t);
  const int n_vec = is_nibble(t)       ? 4
                    : t == WType::Q6_H ? 6
                    : t == WType::Q5_M ? 5
                    : t == WType::Q3_H ? 3
                                       : 8;
  const size_t src_blk = row_bytes(t, kQBlock);
  const uint8_t flip = is_q4(t) ? 0x88 : 0x00;  // IQ4_NL's nibbles stay unsigned indexes
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const uint8_t* blk = src + b * src_blk;
    uint8_t* rec = tile + b * rec_bytes(t);
    std::memcpy(rec + lane * 2, blk, 2);
    if (q4m) std::memcpy(rec + q4m_offsets() + lane * 2, blk + 2, 2);
    if (top) std::memcpy(rec + 2 * kt + lane * 2, blk + 2, 2);  // d[1] or Q5_M's m
    for (int g = 0; g < n_vec; ++g) {
      uint8_t* dst = rec + (top ? 4 : 2) * kt + (g * kt + lane) * 4;
      for (int j = 0; j < 4; ++j) dst[j] = blk[qs + 4 * g + j] ^ flip;
    }
  }
}

// ---- matmul ----

// One quant vector pair: group k against activation group k of each 16-byte half.
template <bool kQ4, int K>
inline void dot_step(const int8_t* q, int64_t gstride, svint8_t al, svint8_t ah, svint32_t& s0,
                     svint32_t& s1) {
  const svbool_t all = svptrue_b8();
  svint8_t w0, w1;
  if constexpr (kQ4) {
    const svint8_t v = svld1_s8(all, q + K * gstride);
    w0 = svlsl_n_s8_x(all, v, 4);
    w1 = svand_n_s8_x(all, v, int8_t(-16));
  } else {
    w0 = svld1_s8(all, q + K * gstride);
    w1 = svld1_s8(all, q + (K + 4) * gstride);
  }
  s0 = svdot_lane_s32(s0, w0, al, K);
  s1 = svdot_lane_s32(s1, w1, ah, K);
}

// Q6_H half H, vector K as signed q - 32: the half's nibbles with bits 2K, 2K+1 of top-bit
// vector H at bits 4-5 (q points at the record's first quant vector).
template <int H, int K>
inline svint8_t q6_quants(const uint8_t* q, int64_t gstride) {
  const svbool_t all = svptrue_b8();
  const svuint8_t v = svld1_u8(all, q + K * gstride), top = svld1_u8(all, q + (4 + H) * gstride);
  svuint8_t t = top;  // K = 2: bits 4-5 already
  if constexpr (K < 2) t = svlsl_n_u8_x(all, top, 4 - 2 * K);
  if constexpr (K == 3) t = svlsr_n_u8_x(all, top, 2);
  const svuint8_t nib = H == 0 ? svand_n_u8_x(all, v, 0x0f) : svlsr_n_u8_x(all, v, 4);
  const svuint8_t w = svorr_u8_x(all, nib, svand_n_u8_x(all, t, 0x30));
  return svreinterpret_s8_u8(svsub_n_u8_x(all, w, 32));
}

// Q5_M vector K as signed q - 16: the low nibbles with bit K of the top-bit vector as bit 4,
// the high ones with bit 4 + K.
template <int K>
inline void q5_step(const uint8_t* q, int64_t gstride, svint8_t al, svint8_t ah, svint32_t& s0,
                    svint32_t& s1) {
  const svbool_t all = svptrue_b8();
  const svuint8_t v = svld1_u8(all, q + K * gstride), top = svld1_u8(all, q + 4 * gstride);
  svuint8_t th = top;
  if constexpr (K > 0) th = svlsr_n_u8_x(all, top, K);
  const svuint8_t lo = svorr_u8_x(all, svand_n_u8_x(all, v, 0x0f),
                                  svand_n_u8_x(all, svlsl_n_u8_x(all, top, 4 - K), 0x10));
  const svuint8_t hi = svorr_u8_x(all, svlsr_n_u8_x(all, v, 4), svand_n_u8_x(all, th, 0x10));
  s0 = svdot_lane_s32(s0, svreinterpret_s8_u8(svsub_n_u8_x(all, lo, 16)), al, K);
  s1 = svdot_lane_s32(s1, svreinterpret_s8_u8(svsub_n_u8_x(all, hi, 16)), ah, K);
}

// IQ4_NL vector K: its nibbles looked up in the level table (16 bytes, in every 128-bit
// segment), the low ones against activation group K of the first half, the high of the second.
template <int K>
inline void iq4_step(const uint8_t* q, int64_t gstride, svint8_t levels, svint8_t al, svint8_t ah,
                     svint32_t& s0, svint32_t& s1) {
  const svbool_t all = svptrue_b8();
  const svuint8_t v = svld1_u8(all, q + K * gstride);
  s0 = svdot_lane_s32(s0, svtbl_s8(levels, svand_n_u8_x(all, v, 0x0f)), al, K);
  s1 = svdot_lane_s32(s1, svtbl_s8(levels, svlsr_n_u8_x(all, v, 4)), ah, K);
}

// Q3_H half H, group K as signed q - 4: bits 2K, 2K+1 of quant vector H with bit 4H + K of the
// top-bit vector as bit 2.
template <int H, int K>
inline svint8_t q3_quants(const uint8_t* q, int64_t gstride) {
  const svbool_t all = svptrue_b8();
  const svuint8_t v = svld1_u8(all, q + H * gstride), top = svld1_u8(all, q + 2 * gstride);
  constexpr int kP = 4 * H + K;  // the top bit's position
  svuint8_t lo = v, t = top;
  if constexpr (K > 0) lo = svlsr_n_u8_x(all, v, 2 * K);
  if constexpr (kP < 2) t = svlsl_n_u8_x(all, top, 2 - kP);
  if constexpr (kP > 2) t = svlsr_n_u8_x(all, top, kP - 2);
  const svuint8_t w = svorr_u8_x(all, svand_n_u8_x(all, lo, 0x03), svand_n_u8_x(all, t, 0x04));
  return svreinterpret_s8_u8(svsub_n_u8_x(all, w, 4));
}

// The int32 sum of Q6_H's (kQ3: Q3_H's) half H of a record with its activation half a_h.
template <int H, bool kQ3 = false>
inline svint32_t q6_half(const uint8_t* q, int64_t gstride, svint8_t ah) {
  const auto quants = [&](auto k) {
    constexpr int K = decltype(k)::value;
    if constexpr (kQ3) {
      return q3_quants<H, K>(q, gstride);
    } else {
      return q6_quants<H, K>(q, gstride);
    }
  };
  svint32_t s = svdup_n_s32(0);
  s = svdot_lane_s32(s, quants(std::integral_constant<int, 0>{}), ah, 0);
  s = svdot_lane_s32(s, quants(std::integral_constant<int, 1>{}), ah, 1);
  s = svdot_lane_s32(s, quants(std::integral_constant<int, 2>{}), ah, 2);
  return svdot_lane_s32(s, quants(std::integral_constant<int, 3>{}), ah, 3);
}

// acc + float(isum) * (d_w * d_a) for one token and one (tile, block) record, then for Q4_M
// and Q5_M + m_w * s_a (dm: the offsets); Q6_H folds its halves in turn (dm: half 1's scales).
template <WType W>
inline svfloat32_t fold_block(svfloat32_t acc, const uint8_t* rec, svfloat32_t dw, svfloat32_t dm,
                              const ActBlock& a) {
  constexpr bool kQ4 = is_q4(W);
  const svbool_t all = svptrue_b8(), pw = svptrue_b32();
  const int64_t kt = tile_rows();
  if constexpr (has_top_bits(W)) {
    const uint8_t* q = rec + 4 * kt;
    const svint8_t al = svld1rq_s8(all, a.qs), ah = svld1rq_s8(all, a.qs + 16);
    if constexpr (W == WType::Q6_H || W == WType::Q3_H) {
      constexpr bool kQ3 = W == WType::Q3_H;
      const svint32_t i0 = q6_half<0, kQ3>(q, 4 * kt, al), i1 = q6_half<1, kQ3>(q, 4 * kt, ah);
      acc = svmla_f32_x(pw, acc, svcvt_f32_s32_x(pw, i0), svmul_n_f32_x(pw, dw, a.d));
      return svmla_f32_x(pw, acc, svcvt_f32_s32_x(pw, i1), svmul_n_f32_x(pw, dm, a.d));
    } else {
      svint32_t s0 = svdup_n_s32(0), s1 = svdup_n_s32(0);
      q5_step<0>(q, 4 * kt, al, ah, s0, s1);
      q5_step<1>(q, 4 * kt, al, ah, s0, s1);
      q5_step<2>(q, 4 * kt, al, ah, s0, s1);
      q5_step<3>(q, 4 * kt, al, ah, s0, s1);
      const svint32_t isum = svadd_s32_x(pw, s0, s1);
      acc = svmla_f32_x(pw, acc, svcvt_f32_s32_x(pw, isum), svmul_n_f32_x(pw, dw, a.d));
      return svmla_n_f32_x(pw, acc, dm, a.s);
    }
  }
  const int8_t* q = reinterpret_cast<const int8_t*>(rec + 2 * kt);
  const svint8_t al = svld1rq_s8(all, a.qs), ah = svld1rq_s8(all, a.qs + 16);
  svint32_t s0 = svdup_n_s32(0), s1 = svdup_n_s32(0);
  if constexpr (W == WType::IQ4_NL) {
    const uint8_t* u = rec + 2 * kt;
    const svint8_t levels = svld1rq_s8(all, kIq4Levels);
    iq4_step<0>(u, 4 * kt, levels, al, ah, s0, s1);
    iq4_step<1>(u, 4 * kt, levels, al, ah, s0, s1);
    iq4_step<2>(u, 4 * kt, levels, al, ah, s0, s1);
    iq4_step<3>(u, 4 * kt, levels, al, ah, s0, s1);
  } else {
    dot_step<kQ4, 0>(q, 4 * kt, al, ah, s0, s1);
    dot_step<kQ4, 1>(q, 4 * kt, al, ah, s0, s1);
    dot_step<kQ4, 2>(q, 4 * kt, al, ah, s0, s1);
    dot_step<kQ4, 3>(q, 4 * kt, al, ah, s0, s1);
  }
  svint32_t isum = svadd_s32_x(pw, s0, s1);
  if constexpr (kQ4) isum = svasr_n_s32_x(pw, isum, 4);
  acc = svmla_f32_x(pw, acc, svcvt_f32_s32_x(pw, isum), svmul_n_f32_x(pw, dw, a.d));
  if constexpr (W == WType::Q4_M) acc = svmla_n_f32_x(pw, acc, dm, a.s);
  return acc;
}

inline svfloat32_t scales(const uint8_t* rec) {
  const svbool_t pw = svptrue_b32();
  const svuint32_t h = svld1uh_u32(pw, reinterpret_cast<const uint16_t*>(rec));
  return svcvt_f32_f16_x(pw, svreinterpret_f16_u32(h));
}

// Tokens [0, n) (n <= 4) of one tile; the weight records come from L1 again for each token.
template <WType W>
void q_tile(const uint8_t* tile, int64_t nb, const ActBlock* const* a, int n, float* out,
            int64_t ld_out, svbool_t store) {
  const size_t rec = rec_bytes(W);
  svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* r = tile + b * rec;
    svprfb(svptrue_b8(), r + 8 * rec, SV_PLDL1KEEP);
    const svfloat32_t dw = scales(r);
    const svfloat32_t dm = W == WType::Q4_M  ? scales(r + q4m_offsets())
                           : has_top_bits(W) ? scales(r + 2 * tile_rows())
                                             : dw;
    acc0 = fold_block<W>(acc0, r, dw, dm, a[0][b]);
    if (n > 1) acc1 = fold_block<W>(acc1, r, dw, dm, a[1][b]);
    if (n > 2) acc2 = fold_block<W>(acc2, r, dw, dm, a[2][b]);
    if (n > 3) acc3 = fold_block<W>(acc3, r, dw, dm, a[3][b]);
  }
  svst1_f32(store, out, acc0);
  if (n > 1) svst1_f32(store, out + ld_out, acc1);
  if (n > 2) svst1_f32(store, out + 2 * ld_out, acc2);
  if (n > 3) svst1_f32(store, out + 3 * ld_out, acc3);
}

inline svfloat32_t column(const uint8_t* tile, int64_t c, bool f16) {
  const svbool_t pw = svptrue_b32();
  const int64_t kt = tile_rows();
  if (f16) {
    const uint16_t* p = reinterpret_cast<const uint16_t*>(tile) + c * kt;
    return svcvt_f32_f16_x(pw, svreinterpret_f16_u32(svld1uh_u32(pw, p)));
  }
  return svld1_f32(pw, reinterpret_cast<const float*>(tile) + c * kt);
}

void f_tile(const uint8_t* tile, int64_t cols, bool f16, const float* const* x, int n, float* out,
            int64_t ld_out, svbool_t store) {
  const svbool_t pw = svptrue_b32();
  svfloat32_t acc0 = svdup_n_f32(0.0f), acc1 = acc0, acc2 = acc0, acc3 = acc0;
  for (int64_t c = 0; c < cols; ++c) {
    const svfloat32_t w = column(tile, c, f16);
    acc0 = svmla_n_f32_x(pw, acc0, w, x[0][c]);
    if (n > 1) acc1 = svmla_n_f32_x(pw, acc1, w, x[1][c]);
    if (n > 2) acc2 = svmla_n_f32_x(pw, acc2, w, x[2][c]);
    if (n > 3) acc3 = svmla_n_f32_x(pw, acc3, w, x[3][c]);
  }
  svst1_f32(store, out, acc0);
  if (n > 1) svst1_f32(store, out + ld_out, acc1);
  if (n > 2) svst1_f32(store, out + 2 * ld_out, acc2);
  if (n > 3) svst1_f32(store, out + 3 * ld_out, acc3);
}

inline svbool_t lanes(int64_t i, int64_t n) { return svwhilelt_b32_s64(i, n); }

// The vector traits of vec_math.h and delta_step.h: vector-length agnostic, width() is
// svcntw(), tails are whilelt predicates (inactive lanes load as 0 and are never stored).
struct Zreg {
  using F = svfloat32_t;
  static int64_t width() { return int64_t(svcntw()); }
  static F zero() { return svdup_f32(0.0f); }
  static F set1(float x) { return svdup_f32(x); }
  static F load(const float* p) { return svld1_f32(svptrue_b32(), p); }
  static void store(float* p, F x) { svst1_f32(svptrue_b32(), p, x); }
  static F load_n(const float* p, int64_t n) { return svld1_f32(lanes(0, n), p); }
  static F load_n(const float* p, int64_t n, float fill) {
    return svsel_f32(lanes(0, n), svld1_f32(lanes(0, n), p), svdup_f32(fill));
  }
  static void store_n(float* p, F x, int64_t n) { svst1_f32(lanes(0, n), p, x); }
  static F add(F a, F b) { return svadd_f32_x(svptrue_b32(), a, b); }
  static F sub(F a, F b) { return svsub_f32_x(svptrue_b32(), a, b); }
  static F mul(F a, F b) { return svmul_f32_x(svptrue_b32(), a, b); }
  static F div(F a, F b) { return svdiv_f32_x(svptrue_b32(), a, b); }
  static F neg(F a) { return svneg_f32_x(svptrue_b32(), a); }
  static F min(F a, F b) { return svmin_f32_x(svptrue_b32(), a, b); }
  static F max(F a, F b) { return svmax_f32_x(svptrue_b32(), a, b); }
  static F fma(F a, F b, F c) { return svmla_f32_x(svptrue_b32(), c, a, b); }
  static F fnma(F a, F b, F c) { return svmls_f32_x(svptrue_b32(), c, a, b); }
  static F mul_sub(F a, F b, F c, F d) {
    return svmls_f32_x(svptrue_b32(), svmul_f32_x(svptrue_b32(), a, b), c, d);
  }
  static float hsum(F x) { return svaddv_f32(svptrue_b32(), x); }
  static float hmax(F x) { return svmaxv_f32(svptrue_b32(), x); }
  static F max_n(F acc, F x, int64_t n) { return svmax_f32_m(lanes(0, n), acc, x); }
  static F add_n(F acc, F x, int64_t n) { return svadd_f32_m(lanes(0, n), acc, x); }
  static F round(F x) { return svrintn_f32_x(svptrue_b32(), x); }
  static constexpr float kExpLo = -87.0f, kExpHi = 88.0f;
  // 2^n built in the exponent field; 0 below kExpLo, where 2^n would leave the normal range.
  static F exp_scale(F y, F n, F x) {
    const svbool_t pg = svptrue_b32();
    const svbool_t tiny = svcmplt_n_f32(pg, x, kExpLo);
    const svint32_t e = svlsl_n_s32_x(pg, svadd_n_s32_x(pg, svcvt_s32_f32_x(pg, n), 127), 23);
    return svsel_f32(tiny, svdup_n_f32(0.0f), svmul_f32_x(pg, y, svreinterpret_f32_s32(e)));
  }
};

}  // namespace

const char* isa_name() { return "sve"; }
const char* missing_cpu_feature() { return cpu_missing_for("sve"); }
bool takes(WType) { return true; }

int row_tile() { return int(tile_rows()); }

size_t packed_size(WType t, int64_t rows, int64_t cols) {
  return size_t(n_tiles(rows)) * tile_bytes(t, cols);
}

void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1, void* dst) {
  const int64_t kt = tile_rows();
  const size_t rb = row_bytes(t, cols), tb = tile_bytes(t, cols);
  for (int64_t i = r0 / kt; i < n_tiles(r1); ++i) {
    uint8_t* tile = static_cast<uint8_t*>(dst) + i * tb;
    std::memset(tile, 0, tb);
    for (int64_t lane = 0; lane < kt && i * kt + lane < rows; ++lane)
      pack_row(t, static_cast<const uint8_t*>(src) + (i * kt + lane) * rb, cols, lane, tile);
  }
}

size_t act_row_size(WType t, int64_t cols) { return tiled::act_row_size(t, cols); }

void quantize_act(WType t, const float* x, int64_t cols, void* dst) {
  if (copy_float_act(t, x, cols, dst)) return;
  ActBlock* out = static_cast<ActBlock*>(dst);
  const int64_t vl = svcntw();
  for (int64_t b = 0; b < cols / kQBlock; ++b) {
    const float* xb = x + b * kQBlock;
    svfloat32_t amax = svdup_n_f32(0.0f);
    for (int64_t i = 0; i < kQBlock; i += vl) {
      const svbool_t pg = lanes(i, kQBlock);
      amax = svmax_f32_m(pg, amax, svabs_f32_x(pg, svld1_f32(pg, xb + i)));
    }
    const float d = svmaxv_f32(svptrue_b32(), amax) / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    for (int64_t i = 0; i < kQBlock; i += vl) {
      const svbool_t pg = lanes(i, kQBlock);
      const svfloat32_t q = svrintn_f32_x(pg, svmul_n_f32_x(pg, svld1_f32(pg, xb + i), id));
      svst1b_s32(pg, out[b].qs + i, svcvt_s32_f32_x(pg, q));  // |q| <= 127: exact bytes
    }
    out[b].d = d;
    out[b].corr = 0;
  }
  tiled::block_sums(t, out, cols / kQBlock);
}

void matmul(WType t, const void* packed, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
            const void* act, int64_t n_tok, float* out, int64_t ld_out) {
  if (r1 <= r0 || n_tok <= 0) return;
  const int64_t kt = tile_rows();
  const size_t tb = tile_bytes(t, cols), ab = act_row_size(t, cols);
  const uint8_t* a8 = static_cast<const uint8_t*>(act);
  for (int64_t i = r0 / kt; i < n_tiles(r1); ++i) {
    const uint8_t* tile = static_cast<const uint8_t*>(packed) + i * tb;
    const svbool_t store = lanes(i * kt, r1);
    for (int64_t tok = 0; tok < n_tok; tok += 4) {
      const int n = int(imin(4, n_tok - tok));
      float* o = out + tok * ld_out + i * kt;
      if (t == WType::F32 || t == WType::F16) {
        const float* x[4];
        for (int u = 0; u < n; ++u) x[u] = reinterpret_cast<const float*>(a8 + (tok + u) * ab);
        f_tile(tile, cols, t == WType::F16, x, n, o, ld_out, store);
      } else {
        const ActBlock* a[4];
        for (int u = 0; u < n; ++u) a[u] = reinterpret_cast<const ActBlock*>(a8 + (tok + u) * ab);
        if (t == WType::Q4_0) {
          q_tile<WType::Q4_0>(tile, cols / kQBlock, a, n, o, ld_out, store);
        } else if (t == WType::Q4_M) {
          q_tile<WType::Q4_M>(tile, cols / kQBlock, a, n, o, ld_out, store);
        } else if (t == WType::Q6_H) {
          q_tile<WType::Q6_H>(tile, cols / kQBlock, a, n, o, ld_out, store);
        } else if (t == WType::Q5_M) {
          q_tile<WType::Q5_M>(tile, cols / kQBlock, a, n, o, ld_out, store);
        } else if (t == WType::Q3_H) {
          q_tile<WType::Q3_H>(tile, cols / kQBlock, a, n, o, ld_out, store);
        } else if (t == WType::IQ4_NL) {
          q_tile<WType::IQ4_NL>(tile, cols / kQBlock, a, n, o, ld_out, store);
        } else {
          q_tile<WType::Q8_0>(tile, cols / kQBlock, a, n, o, ld_out, store);
        }
      }
    }
  }
}

KRAFLA_SCALAR_ROW_ENTRIES()

void f16_to_f32(const uint16_t* x, float* y, int64_t n) {
  for (int64_t i = 0; i < n; i += svcntw()) {
    const svbool_t pg = lanes(i, n);
    const svfloat16_t h = svreinterpret_f16_u32(svld1uh_u32(pg, x + i));
    svst1_f32(pg, y + i, svcvt_f32_f16_x(pg, h));
  }
}

void f32_to_f16(const float* x, uint16_t* y, int64_t n) {
  for (int64_t i = 0; i < n; i += svcntw()) {
    const svbool_t pg = lanes(i, n);
    const svfloat16_t h = svcvt_f16_f32_x(pg, svld1_f32(pg, x + i));
    svst1h_u32(pg, y + i, svreinterpret_u32_f16(h));  // the half sits in each lane's low bits
  }
}

float dot_f32(const float* a, const float* b, int64_t n) {
  svfloat32_t s = svdup_n_f32(0.0f);
  for (int64_t i = 0; i < n; i += svcntw()) {
    const svbool_t pg = lanes(i, n);
    s = svmla_f32_m(pg, s, svld1_f32(pg, a + i), svld1_f32(pg, b + i));
  }
  return svaddv_f32(svptrue_b32(), s);
}

KRAFLA_VEC_MATH_ENTRIES(Zreg)

}  // namespace krafla::kernels
