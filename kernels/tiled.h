// The row-tiled layout, the register-tile bodies and the matmul driver shared by the SIMD
// kernel TUs (all but sve.cpp); each ISA supplies a tile policy P with its tile height, its
// register tiles and its int8 block dot (see q_kernel below).
//
// Layout, for a tile of kTile rows:
//  * F32/F16: column-major inside the tile: kTile values of column c, then column c+1, ...
//  * Q8_0/Q4_0/Q4_M: one record per (tile, block): kTile f16 scales, then the quants as
//    vectors of kTile dwords, dword lane r = 4 consecutive quant bytes of row r. Q8_0 has 8
//    such vectors (bytes 4g..4g+3, optionally xor 0x80 to make them unsigned), Q4_0 and Q4_M
//    have 4 (stored bytes 4k..4k+3, whose low nibbles are elements 4k.. and high nibbles
//    16+4k..); Q4_M's record ends with its kTile f16 offsets. IQ4_NL's record is Q4_0's (its
//    nibbles index the level table).
//    A 4-byte activation broadcast then feeds one dot instruction for kTile rows, and each
//    lane ends a block holding its own row's exact int32 sum: no horizontal reductions.
//  * Q6_H: kTile f16 scales of each row's elements 0..15, kTile of 16..31, Q4_0's 4 nibble
//    vectors, then 2 vectors of top bits: dword lane r of vector 4+h = qh[4h..4h+3] of row r
//    (BlockQ6_H), so vector k's nibble byte j of half h takes bits 2k, 2k+1 of byte j there.
//  * Q5_M: kTile f16 scales, kTile f16 offsets, Q4_0's 4 nibble vectors, then 1 vector of top
//    bits, dword lane r = qh[0..3] of row r (BlockQ5_M): vector k's byte j takes bit k of byte
//    j there for its low nibble, bit 4 + k for its high one.
//  * Q3_H: as Q6_H, kTile f16 scales of each row's elements 0..15 and kTile of 16..31, then 2
//    vectors of low bit pairs, dword lane r = qs[4h..4h+3] of row r for vector h (BlockQ3_H),
//    then 1 vector of top bits, dword lane r = qh[0..3] of row r.
//  * Tiles follow one another, so a decode thread streams each tile linearly. Rows past the
//    end of the last tile are zero (scale 0) and never stored.
//
// Only one ISA TU is linked into a build and scalar.cpp never includes this, but everything is
// in an anonymous namespace anyway so no ISA-compiled copy can be shared with baseline code.
#pragma once
#include <cstring>

#include "kernels/common.h"
#include "kernels/kernels.h"

namespace krafla::kernels::tiled {
namespace {

// One quantized activation block: signed quants (the broadcast operand), the f32 scale, an
// integer correction the ISA's dot needs (e.g. c*sum(qs) when the weights were made unsigned),
// for Q4_M weights s = d*sum(qs), which their offsets multiply (set by block_sums), and for
// Q6_H weights the corrections of the block's two halves, corr and corr_hi (block_sums).
// Q5_M weights use s as Q4_M's do; Q3_H weights corr and corr_hi as Q6_H's (times 4, not 32).
struct ActBlock {
  int8_t qs[32];
  float d;
  int32_t corr;
  float s;
  int32_t corr_hi;
};
static_assert(sizeof(ActBlock) == 48);

// Every ISA's quantize_act ends with this: the blocks' s for Q4_M and Q5_M weights (an exact int
// sum, one rounding), 0 otherwise; for Q6_H weights (unsigned q = w + 32 in the x86 dots)
// corr = 32 * the sum of quants 0..15 and corr_hi = 32 * that of 16..31 (Q3_H, q = w + 4: 4 *
// them); for Q5_M (q = w + 16) corr = 16 * the sum. (The NEON dots make the values signed and
// ignore corr and corr_hi.)
inline void block_sums(WType t, ActBlock* a, int64_t nb) {
  for (int64_t b = 0; b < nb; ++b) {
    int32_t sum = 0;
    if (t == WType::Q4_M || t == WType::Q5_M)
      for (int8_t q : a[b].qs) sum += q;
    a[b].s = a[b].d * float(sum);
    if (t == WType::Q5_M) a[b].corr = 16 * sum;
    a[b].corr_hi = 0;
    if (t == WType::Q6_H || t == WType::Q3_H) {
      int32_t lo = 0, hi = 0;
      for (int i = 0; i < 16; ++i) {
        lo += a[b].qs[i];
        hi += a[b].qs[16 + i];
      }
      const int32_t c = t == WType::Q6_H ? 32 : 4;
      a[b].corr = c * lo;
      a[b].corr_hi = c * hi;
    }
  }
}

inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }

template <int kTile>
struct Layout {
  static constexpr int kRows = kTile;
  static constexpr size_t kQ4Rec = 2 * kTile + 16 * kTile;  // scales + 16 quant bytes per row
  static constexpr size_t kQ8Rec = 2 * kTile + 32 * kTile;
  static constexpr size_t kQ4MRec = kQ4Rec + 2 * kTile;     // Q4_0's, then kTile f16 offsets
  static constexpr size_t kQ6Rec = 4 * kTile + 24 * kTile;  // 2 scales, nibbles, top bits
  static constexpr size_t kQ5Rec = 4 * kTile + 20 * kTile;  // scale, offset, nibbles, top bits
  static constexpr size_t kQ3Rec = 4 * kTile + 12 * kTile;  // 2 scales, bit pairs, top bits
  static constexpr size_t kQuants = 2 * kTile;              // quants' offset in a record
  static constexpr size_t kTopQuants = 4 * kTile;           // Q6_H's, Q5_M's and Q3_H's

  static constexpr size_t rec_bytes(WType t) {
    return t == WType::Q8_0   ? kQ8Rec
           : t == WType::Q4_M ? kQ4MRec
           : t == WType::Q6_H ? kQ6Rec
           : t == WType::Q5_M ? kQ5Rec
           : t == WType::Q3_H ? kQ3Rec
                              : kQ4Rec;
  }

  static int64_t n_tiles(int64_t rows) { return (rows + kTile - 1) / kTile; }

  static size_t tile_bytes(WType t, int64_t cols) {
    switch (t) {
      case WType::F32:
        return size_t(cols) * kTile * 4;
      case WType::F16:
        return size_t(cols) * kTile * 2;
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
  static void pack_row(WType t, const uint8_t* src, int64_t cols, int lane, uint8_t q8_xor,
                       uint8_t* tile) {
    if (t == WType::F32 || t == WType::F16) {
      const int es = t == WType::F32 ? 4 : 2;
      for (int64_t c = 0; c < cols; ++c)
        std::memcpy(tile + (c * kTile + lane) * es, src + c * es, es);
      return;
    }
    const bool nib = is_nibble(t), q4m = t == WType::Q4_M,
               top = t == WType::Q6_H || t == WType::Q5_M || t == WType::Q3_H;
    // Q6_H, Q5_M, Q3_H: qs, then qh
    const int n_vec = nib                ? 4
                      : t == WType::Q6_H ? 6
                      : t == WType::Q5_M ? 5
                      : t == WType::Q3_H ? 3
                                         : 8;
    const int qs = quants_offset(t);
    for (int64_t b = 0; b < cols / kQBlock; ++b) {
      const uint8_t* blk = src + b * row_bytes(t, kQBlock);  // f16 d, [f16 m/d,] the quant bytes
      uint8_t* rec = tile + b * rec_bytes(t);
      std::memcpy(rec + lane * 2, blk, 2);
      if (q4m) std::memcpy(rec + kQ4Rec + lane * 2, blk + 2, 2);
      if (top) std::memcpy(rec + 2 * kTile + lane * 2, blk + 2, 2);  // d[1] or Q5_M's m
      for (int g = 0; g < n_vec; ++g) {
        uint8_t* dst = rec + (top ? kTopQuants : kQuants) + g * 4 * kTile + lane * 4;
        for (int j = 0; j < 4; ++j) dst[j] = blk[qs + 4 * g + j] ^ (nib || top ? 0 : q8_xor);
      }
    }
  }

  static void pack(WType t, const void* src, int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                   uint8_t q8_xor, void* dst) {
    const size_t rb = row_bytes(t, cols), tb = tile_bytes(t, cols);
    for (int64_t i = r0 / kTile; i < n_tiles(r1); ++i) {
      uint8_t* tile = static_cast<uint8_t*>(dst) + i * tb;
      std::memset(tile, 0, tb);
      for (int lane = 0; lane < kTile && i * kTile + lane < rows; ++lane)
        pack_row(t, static_cast<const uint8_t*>(src) + (i * kTile + lane) * rb, cols, lane, q8_xor,
                 tile);
    }
  }
};

inline size_t act_row_size(WType t, int64_t cols) {
  if (t == WType::F32 || t == WType::F16) return size_t(cols) * 4;
  return size_t(cols / kQBlock) * sizeof(ActBlock);
}

// What a register-tile kernel gets: R row tiles x T tokens starting at (tile, token).
struct MmArgs {
  const uint8_t* w;  // first row tile of the group
  size_t tbytes;     // bytes per row tile
  int64_t cols;
  const uint8_t* act;  // first token of the group
  size_t act_bytes;    // bytes per activation row
  float* out;          // out + tok0 * ld_out + first row of the group
  int64_t ld_out;
  const int* valid;  // rows to store per tile of the group (kTile except in the last tile)
};

// Software prefetch for decode (one token: the matmul is a pure weight stream): every cache
// line of `bytes` at p.
inline void prefetch_lines(const uint8_t* p, size_t bytes) {
  for (size_t l = 0; l < bytes; l += 64) __builtin_prefetch(p + l);
}

// The register tiles of the policies with few vector registers (SSE, AVX2, NEON): in decode
// kDecodeTiles row tiles x 1 token, 2 x 2 for two tokens, else 1 tile x 3-4 tokens (the driver
// asks only for what supports() allows: the accumulators must fit the register file).
template <int kDecodeTiles>
struct SmallRegisterTiles {
  static constexpr int64_t r_step(int64_t tok_step) {
    return tok_step == 1 ? kDecodeTiles : tok_step == 2 ? 2 : 1;
  }
  static constexpr bool supports(int R, int T) { return T == 1 || R == 1 || (R == 2 && T == 2); }
};

// The decode prefetch of the AVX policies: kRecs (tile, block) records ahead in each quant
// stream (2-8 measured alike, +15-30% over none on Zen 4, 16+ starts to lose; on Zen 5 avx2
// +42-65% on Q8_0/Q4_0 decode, avxvnni +20-40%), 1 KiB ahead in an F32/F16 column stream.
template <size_t kRecs>
struct StreamPrefetch {
  static constexpr int64_t kPrefetchRecs = kRecs;
  static void prefetch_q(const uint8_t* rec, size_t bytes) { prefetch_lines(rec, bytes); }
  template <bool kF16>
  static void prefetch_f(const uint8_t* col, int64_t) {
    __builtin_prefetch(col + 1024);
  }
};

// The same with the distance in bytes, kBytes ahead rounded down to whole records (at least one):
// with AVX-512's 16-row tiles a record is twice AVX2's, and 8 records (3.5-4.3 KiB for
// Q6_H/Q8_0) measured 15-50% slower on Zen 5 than 1-2 KiB, whatever the type.
template <size_t kBytes>
struct StreamPrefetchBytes : StreamPrefetch<0> {
  static constexpr size_t kPrefetchBytes = kBytes;
};

// Records ahead of the decode prefetch in a stream of kRec-byte records (0: none).
template <class P, size_t kRec>
constexpr int64_t prefetch_ahead() {
  if constexpr (requires { P::kPrefetchBytes; }) {
    return int64_t(P::kPrefetchBytes / kRec > 0 ? P::kPrefetchBytes / kRec : 1);
  } else {
    return int64_t(P::kPrefetchRecs);
  }
}

// The R x T accumulators of a register tile: zeroed, then stored one row tile at a time
// (valid[r] rows of tile r).
template <class P, int R, int T>
struct Accumulators {
  using V = typename P::V;
  typename V::F v[R][T];
  Accumulators() {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int t = 0; t < T; ++t) v[r][t] = V::zero();
  }
  void store(float* out, int64_t ld_out, const int* valid) const {
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) V::store_n(out + t * ld_out + r * P::kTile, v[r][t], valid[r]);
  }
};

// acc += float(ia) * (d_w * d_a) for a block's int sums ia, d_w the kTile f16 scales at
// wb[r] + scale_off.
template <class P, int R, int T>
inline void fold_block(const uint8_t* const* wb, size_t scale_off, const ActBlock* const* a,
                       int64_t b, const typename P::I (&ia)[R][T], Accumulators<P, R, T>& acc) {
  using V = typename P::V;
  typename V::F dw[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) dw[r] = P::load_f16(wb[r] + scale_off);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const typename V::F da = V::set1(a[t][b].d);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
      acc.v[r][t] = V::fma(P::to_f32(ia[r][t]), V::mul(dw[r], da), acc.v[r][t]);
  }
}

// acc += m_w * s_a: the kTile f16 offsets m_w at wb[r] + off times the activation block's
// d * sum(qs) (Q4_M, Q5_M).
template <class P, int R, int T>
inline void fold_offset(const uint8_t* const* wb, size_t off, const ActBlock* const* a, int64_t b,
                        Accumulators<P, R, T>& acc) {
  using V = typename P::V;
  typename V::F dm[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) dm[r] = P::load_f16(wb[r] + off);
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const typename V::F sa = V::set1(a[t][b].s);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc.v[r][t] = V::fma(dm[r], sa, acc.v[r][t]);
  }
}

// Whether tile policy P has the dots of the types with top bits: Q6_H's P::block6<h, R, T> (the
// int sums of half h) and Q5_M's P::block5<R, T>.
template <class P>
constexpr bool kHasTopBits = requires {
  requires P::kTopBits;
};

// Whether tile policy P has Q3_H's dot, P::block3<h, R, T> (the int sums of half h).
template <class P>
constexpr bool kHasQ3 = requires {
  requires P::kQ3;
};

// Whether tile policy P has IQ4_NL's dot, P::block_iq4<R, T> (the int sums of the levels).
template <class P>
constexpr bool kHasIq4 = requires {
  requires P::kIq4;
};

// The register-tile bodies, written once over the ISA's tile policy P:
//  * P::V: the float vector traits of vec_math.h (zero, set1, load, mul, fma, store_n), with
//    one vector = one column of a row tile (P::kTile rows);
//  * P::I and P::block<kQ4, R, T>(wb, a, b, ia): the int8 block dot, where the ISAs differ. It
//    fills ia[r][t] with the exact int32 sum of record wb[r] (tile r, block b) with token t's
//    block b, one lane per row, the correction a[t][b].corr already taken off;
//    Q6_H's P::block6<h, R, T> does the same for half h of the block and Q5_M's
//    P::block5<R, T> for the block (where kHasTopBits<P>), IQ4_NL's P::block_iq4<R, T> likewise
//    (where kHasIq4<P>) and Q3_H's P::block3<h, R, T> as Q6_H's (where kHasQ3<P>);
//  * P::to_f32(I), P::load_f16(p) (kTile halves: a record's scales, an F16 tile column);
//  * P::kPrefetchRecs (0: none) or P::kPrefetchBytes (prefetch_ahead) and P::prefetch_q(rec,
//    bytes), which fetches the record at rec (or its first line): the decode prefetch of the
//    quant streams, that many records (bytes) ahead;
//    P::prefetch_f<kF16>(col, c): an F32/F16 column stream's.
// Per block, acc = fma(float(isum), d_w*d_a, acc) in the row's lane whatever R and T are, which
// is what makes each output bitwise independent of the register tile; Q4_M (the Q4_0 dot) then
// adds its offset's share, acc = fma(m_w, s_a, acc); Q6_H folds its two halves in turn; Q5_M
// folds as Q4_M.
template <class P, WType W, int R, int T>
void q_kernel(const uint8_t* w, size_t tbytes, int64_t nb, const ActBlock* const* a, float* out,
              int64_t ld_out, const int* valid) {
  using L = Layout<P::kTile>;
  constexpr bool kQ4 = is_q4(W);
  constexpr size_t kRec = L::rec_bytes(W);
  constexpr int64_t kAhead = prefetch_ahead<P, kRec>();
  Accumulators<P, R, T> acc;
  for (int64_t b = 0; b < nb; ++b) {
    const uint8_t* wb[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      wb[r] = w + r * tbytes + b * kRec;
      // kAhead records ahead in tile r's stream; past the tile's end, in the next row
      // group's tile r (not the next tile, which is this group's and already streaming), so
      // that group's streams start warm.
      if constexpr (T == 1 && kAhead > 0)
        P::prefetch_q(wb[r] + kAhead * kRec + (b + kAhead >= nb ? (R - 1) * tbytes : 0), kRec);
    }
    typename P::I ia[R][T];
    if constexpr (W == WType::Q6_H) {  // each half with its own scale: elements 0..15, 16..31
      P::template block6<0, R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 0, a, b, ia, acc);
      P::template block6<1, R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 2 * P::kTile, a, b, ia, acc);
    } else if constexpr (W == WType::Q3_H) {  // as Q6_H
      P::template block3<0, R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 0, a, b, ia, acc);
      P::template block3<1, R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 2 * P::kTile, a, b, ia, acc);
    } else if constexpr (W == WType::IQ4_NL) {
      P::template block_iq4<R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 0, a, b, ia, acc);
    } else if constexpr (W == WType::Q5_M) {
      P::template block5<R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 0, a, b, ia, acc);
      fold_offset<P, R, T>(wb, 2 * P::kTile, a, b, acc);
    } else {
      P::template block<kQ4, R, T>(wb, a, b, ia);
      fold_block<P, R, T>(wb, 0, a, b, ia, acc);
    }
    if constexpr (W == WType::Q4_M) fold_offset<P, R, T>(wb, L::kQ4Rec, a, b, acc);
  }
  acc.store(out, ld_out, valid);
}

// R row tiles x T tokens of F32/F16 matmul: acc = fma(w[c], x[c], acc) over c in order.
template <class P, bool kF16, int R, int T>
void f_kernel(const uint8_t* w, size_t tbytes, int64_t cols, const float* const* x, float* out,
              int64_t ld_out, const int* valid) {
  using V = typename P::V;
  using F = typename V::F;
  Accumulators<P, R, T> acc;
  for (int64_t c = 0; c < cols; ++c) {
    F wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const uint8_t* p = w + r * tbytes + c * P::kTile * (kF16 ? 2 : 4);
      if constexpr (T == 1) P::template prefetch_f<kF16>(p, c);
      wv[r] = kF16 ? P::load_f16(p) : V::load(reinterpret_cast<const float*>(p));
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const F xv = V::set1(x[t][c]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc.v[r][t] = V::fma(wv[r], xv, acc.v[r][t]);
    }
  }
  acc.store(out, ld_out, valid);
}

template <class K, WType W, int R, int T>
void run_tile(const MmArgs& m) {
  if constexpr (W != WType::F32 && W != WType::F16) {
    const ActBlock* a[T];
    for (int t = 0; t < T; ++t) a[t] = reinterpret_cast<const ActBlock*>(m.act + t * m.act_bytes);
    q_kernel<K, W, R, T>(m.w, m.tbytes, m.cols / kQBlock, a, m.out, m.ld_out, m.valid);
  } else {
    const float* x[T];
    for (int t = 0; t < T; ++t) x[t] = reinterpret_cast<const float*>(m.act + t * m.act_bytes);
    f_kernel<K, W == WType::F16, R, T>(m.w, m.tbytes, m.cols, x, m.out, m.ld_out, m.valid);
  }
}

using TileFn = void (*)(const MmArgs&);
template <class K, WType W, int R, int T>
constexpr TileFn tile_fn() {
  if constexpr (K::supports(R, T)) {
    return run_tile<K, W, R, T>;
  } else {
    return nullptr;
  }
}
template <class K, WType W>
constexpr TileFn kTileFns[4][4] = {
    {tile_fn<K, W, 1, 1>(), tile_fn<K, W, 1, 2>(), tile_fn<K, W, 1, 3>(), tile_fn<K, W, 1, 4>()},
    {tile_fn<K, W, 2, 1>(), tile_fn<K, W, 2, 2>(), tile_fn<K, W, 2, 3>(), tile_fn<K, W, 2, 4>()},
    {tile_fn<K, W, 3, 1>(), tile_fn<K, W, 3, 2>(), tile_fn<K, W, 3, 3>(), tile_fn<K, W, 3, 4>()},
    {tile_fn<K, W, 4, 1>(), tile_fn<K, W, 4, 2>(), tile_fn<K, W, 4, 3>(), tile_fn<K, W, 4, 4>()}};

// Rows outer, tokens inner: a group of row tiles stays in cache while every token group streams
// past it. The register-tile shape may vary (remainders), the per-lane arithmetic never does,
// which is what makes each output bitwise independent of n_tok, r0 and r1.
template <class K, WType W>
void matmul_t(const void* packed, int64_t cols, int64_t r0, int64_t r1, const void* act,
              int64_t n_tok, float* out, int64_t ld_out) {
  constexpr int kTile = K::kTile;
  const size_t tb = Layout<kTile>::tile_bytes(W, cols);
  const size_t ab = tiled::act_row_size(W, cols);
  const int64_t tok_step = imin(n_tok, 4);
  const int64_t r_step = K::r_step(tok_step);
  const int64_t i_end = Layout<kTile>::n_tiles(r1);
  const int64_t n_steps = (n_tok + tok_step - 1) / tok_step;
  for (int64_t i = r0 / kTile; i < i_end; i += r_step) {
    const int nr = int(imin(r_step, i_end - i));
    int valid[4];
    for (int r = 0; r < nr; ++r) valid[r] = int(imin(kTile, r1 - (i + r) * kTile));
    // Several token steps (prefill): each one prefetches a slice of the next row group, so
    // that group's first step finds its weights in cache instead of waiting on memory.
    const int64_t next_tiles = imin(r_step, i_end - i - r_step);  // <= 0 for the last group
    const size_t next_bytes = n_steps > 1 && next_tiles > 0 ? size_t(next_tiles) * tb : 0;
    const size_t slice = (next_bytes / size_t(n_steps) + 64) & ~size_t(63);
    const uint8_t* next = static_cast<const uint8_t*>(packed) + (i + r_step) * tb;
    for (int64_t tok = 0, step = 0; tok < n_tok; tok += tok_step, ++step) {
      if (const size_t off = size_t(step) * slice; off < next_bytes)
        prefetch_lines(next + off, size_t(imin(int64_t(slice), int64_t(next_bytes - off))));
      const int nt = int(imin(tok_step, n_tok - tok));
      const MmArgs m{static_cast<const uint8_t*>(packed) + i * tb,
                     tb,
                     cols,
                     static_cast<const uint8_t*>(act) + tok * ab,
                     ab,
                     out + tok * ld_out + i * kTile,
                     ld_out,
                     valid};
      kTileFns<K, W>[nr - 1][nt - 1](m);
    }
  }
}

template <class K>
void matmul(WType t, const void* packed, int64_t cols, int64_t r0, int64_t r1, const void* act,
            int64_t n_tok, float* out, int64_t ld_out) {
  if (r1 <= r0 || n_tok <= 0) return;
  switch (t) {
    case WType::F32:
      return matmul_t<K, WType::F32>(packed, cols, r0, r1, act, n_tok, out, ld_out);
    case WType::F16:
      return matmul_t<K, WType::F16>(packed, cols, r0, r1, act, n_tok, out, ld_out);
    case WType::Q8_0:
      return matmul_t<K, WType::Q8_0>(packed, cols, r0, r1, act, n_tok, out, ld_out);
    case WType::Q4_0:
      return matmul_t<K, WType::Q4_0>(packed, cols, r0, r1, act, n_tok, out, ld_out);
    case WType::Q4_M:
      return matmul_t<K, WType::Q4_M>(packed, cols, r0, r1, act, n_tok, out, ld_out);
    case WType::Q6_H:
      if constexpr (kHasTopBits<K>)
        return matmul_t<K, WType::Q6_H>(packed, cols, r0, r1, act, n_tok, out, ld_out);
      return;
    case WType::Q5_M:
      if constexpr (kHasTopBits<K>)
        return matmul_t<K, WType::Q5_M>(packed, cols, r0, r1, act, n_tok, out, ld_out);
      return;
    case WType::IQ4_NL:
      if constexpr (kHasIq4<K>)
        return matmul_t<K, WType::IQ4_NL>(packed, cols, r0, r1, act, n_tok, out, ld_out);
      return;
    case WType::Q3_H:
      if constexpr (kHasQ3<K>)
        return matmul_t<K, WType::Q3_H>(packed, cols, r0, r1, act, n_tok, out, ld_out);
      return;
  }
}

}  // namespace
}  // namespace krafla::kernels::tiled

// The table entries every tiled ISA defines alike, for its layout L (a tiled::Layout).
#define KRAFLA_TILED_LAYOUT_ENTRIES(L)                        \
  int row_tile() { return L::kRows; }                         \
  size_t packed_size(WType t, int64_t rows, int64_t cols) {   \
    return size_t(L::n_tiles(rows)) * L::tile_bytes(t, cols); \
  }                                                           \
  size_t act_row_size(WType t, int64_t cols) { return tiled::act_row_size(t, cols); }

// The entries that name the ISA (NAME, as cpu_missing_for spells it) and run tiled.h's driver
// over the TU's tile policy P.
#define KRAFLA_TILED_ISA_ENTRIES(NAME, P)                                                 \
  const char* isa_name() { return NAME; }                                                 \
  const char* missing_cpu_feature() { return cpu_missing_for(NAME); }                     \
  bool takes(WType t) {                                                                   \
    return t == WType::IQ4_NL                     ? tiled::kHasIq4<P>                     \
           : t == WType::Q3_H                     ? tiled::kHasQ3<P>                      \
           : t == WType::Q6_H || t == WType::Q5_M ? tiled::kHasTopBits<P>                 \
                                                  : true;                                 \
  }                                                                                       \
  void matmul(WType t, const void* packed, int64_t, int64_t cols, int64_t r0, int64_t r1, \
              const void* act, int64_t n_tok, float* out, int64_t ld_out) {               \
    tiled::matmul<P>(t, packed, cols, r0, r1, act, n_tok, out, ld_out);                   \
  }
