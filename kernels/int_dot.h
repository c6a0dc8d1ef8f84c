// The x86 int8 block dots of tiled.h's q_kernel (P::block), written once over an integer
// vector trait X for xmm (sse41.cpp), ymm (avx2_table.h) and zmm (avx512vnni.cpp). One vector
// holds X::kTile rows x 4 quant bytes of a (tile, block) record; a broadcast 4-byte activation
// group serves every row, so each lane ends the block with its own row's exact int32 sum.
//
// X supplies: I (the vector type), kTile, load(p), bcast4(p), set1(int32), zero(), add32, sub32,
// and for each dot it is used with:
//  * maddubs_block (SSSE3 pmaddubsw / AVX2 vpmaddubsw, then pmaddwd against ones): maddubs(u8,
//    s8) into saturating int16 pairs, add16, madd1 (int16 pairs summed into int32), abs8, sign8.
//    - Q4_0: nibbles are the unsigned operand, dot(n, a) = dot(w, a) + 8*sum(a). A pair is at
//      most 2*15*127 = 3810, so a block's 8 groups sum in int16 (<= 30480) before one madd1.
//    - Q8_0: weights stay signed; the sign moves to the activation, maddubs(|w|, sign(a, w)).
//      A pair is at most 2*128*127 = 32512: fits int16, but two do not, so every group goes
//      through madd1. No correction term (corr = 0).
//  * vnni_block (AVX-VNNI / AVX-512 VNNI vpdpbusd): dpbusd(acc, u8, s8). The weights are the
//    unsigned operand (Q4 nibbles as they are, Q8 packed xor 0x80 = w + 128) and the int32
//    lane starts at -corr = -c*sum(a).
// Both take Q4_0's record as 4 vectors whose low nibbles are elements 4k.. and high nibbles
// 16+4k.. (tiled.h's layout), split by nibbles(v, lo, hi).
// Q6_H (vnni_block6, maddubs_block6; X also supplies shl4, shr2, six): half h of a block,
// the 4 vectors' low (h = 0) or high (h = 1) nibbles with bits 4-5 taken from the top-bit
// vector h, q = 0..63 unsigned, the lane starting at -corr (h = 0) or -corr_hi: both 32 * the
// half's activation sum. maddubs pairs are at most 2*63*127 = 16002, so two sum in int16.
// Q5_M (vnni_block5, maddubs_block5; X also supplies shr1, five): the 4 vectors' nibbles with
// bit 4 from the top-bit vector, q = 0..31 unsigned, the lane starting at -corr = -16*sum(a);
// maddubs pairs are at most 2*31*127 = 7874, so a vector's two (low, high) twice sum in int16.
// Q3_H (vnni_block3, maddubs_block3; X also supplies srl32<N>, sll32<N> and three): half h of a
// block as Q6_H's, q = 0..7 unsigned from the bit pairs of quant vector h and the top-bit vector,
// the lane starting at -corr (h = 0) or -corr_hi: both 4 * the half's activation sum. maddubs
// pairs are at most 2*7*127 = 1778, so a half's four sum in int16.
// IQ4_NL (vnni_block_iq4, maddubs_block_iq4; X also supplies table(levels), a vector of the 16
// bytes in every 128-bit lane, and lut(table, nibbles), a byte shuffle): Q4_0's nibbles looked up
// as levels. vnni takes level + 128 (unsigned, the lane starts at -corr = -128*sum(a), as
// Q8_0's); maddubs takes |level| and moves the sign to the activation (Q8_0's form, no
// correction), a pair at most 2*127*127 = 32258, so each group goes through madd1.
#pragma once
#include <cstdint>

#include "kernels/tiled.h"

namespace krafla::kernels::tiled {
namespace {

// The quant vector g of the R records of a block, from the ISA's view of the layout.
template <class X, int R>
inline void load_quants(const uint8_t* const* wb, int g, typename X::I (&v)[R]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) v[r] = X::load(wb[r] + Layout<X::kTile>::kQuants + 4 * X::kTile * g);
}

template <class X, int R, int T>
inline void fill(typename X::I (&x)[R][T], typename X::I v) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) x[r][t] = v;
}

// Q4_0: f(r, t, lo, hi, alo, ahi) for each of a block's 4 quant vectors, split into low and
// high nibbles (each then mapped by map, IQ4_NL's level lookup), with token t's matching
// activation groups.
template <class X, int R, int T, class F, class Map>
inline void q4_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f,
                      Map&& map) {
  using I = typename X::I;
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    I v[R], lo[R], hi[R];
    load_quants<X, R>(wb, k, v);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      X::nibbles(v[r], lo[r], hi[r]);
      lo[r] = map(lo[r]);
      hi[r] = map(hi[r]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const I alo = X::bcast4(a[t][b].qs + 4 * k), ahi = X::bcast4(a[t][b].qs + 16 + 4 * k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) f(r, t, lo[r], hi[r], alo, ahi);
    }
  }
}

template <class X, int R, int T, class F>
inline void q4_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f) {
  q4_groups<X, R, T>(wb, a, b, f, [](typename X::I v) { return v; });
}

// IQ4_NL's levels as bytes, + 128 (vnni's unsigned operand) or as they are (maddubs').
template <bool kUnsigned>
struct Iq4Table {
  uint8_t v[16];
  constexpr Iq4Table() : v() {
    for (int i = 0; i < 16; ++i) v[i] = uint8_t(kIq4Levels[i] + (kUnsigned ? 128 : 0));
  }
};

// IQ4_NL: q4_groups with each nibble looked up as its level (+ 128 where kUnsigned).
template <class X, bool kUnsigned, int R, int T, class F>
inline void iq4_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f) {
  static constexpr Iq4Table<kUnsigned> kLevels;
  const typename X::I table = X::table(kLevels.v);
  q4_groups<X, R, T>(wb, a, b, f, [&](typename X::I n) { return X::lut(table, n); });
}

// Q8_0: f(r, t, w, ag) for each of a block's 8 quant vectors with token t's activation group.
template <class X, int R, int T, class F>
inline void q8_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f) {
  using I = typename X::I;
#pragma GCC unroll 8
  for (int g = 0; g < 8; ++g) {
    I v[R];
    load_quants<X, R>(wb, g, v);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const I ag = X::bcast4(a[t][b].qs + 4 * g);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) f(r, t, v[r], ag);
    }
  }
}

// Q6_H half h: f(r, t, q, ag) for quant vectors k0..k1-1 made 6-bit (vector k's nibbles of half
// h, bits 4-5 from bits 2k, 2k+1 of the top-bit vector's bytes) with token t's activation group.
template <class X, int h, int k0, int k1, int R, int T, class F>
inline void q6_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f) {
  using I = typename X::I;
  constexpr size_t kVec = 4 * X::kTile, kOff = Layout<X::kTile>::kTopQuants;
  static_assert(k0 == 0 || k0 == 2);
  // The top-bit vector h, and it shifted so that vector k's two bits lie at bits 4-5: left by 4
  // for k = 0, then right by 2 for k = 1; the vector itself for k = 2 (shifting a dword left
  // drops byte 3's bits 4-7, which k = 2 and 3 need), then right by 2 for k = 3.
  I tv[R], top[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    tv[r] = X::load(wb[r] + kOff + (4 + h) * kVec);
    top[r] = k0 == 0 ? X::shl4(tv[r]) : tv[r];
  }
#pragma GCC unroll 4
  for (int k = k0; k < k1; ++k) {
    I q[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      I lo, hi;
      X::nibbles(X::load(wb[r] + kOff + k * kVec), lo, hi);
      q[r] = X::six(h ? hi : lo, top[r]);
      top[r] = k == 1 ? tv[r] : X::shr2(top[r]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const I ag = X::bcast4(a[t][b].qs + 16 * h + 4 * k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) f(r, t, q[r], ag);
    }
  }
}

// Q3_H half h, group k: f(r, t, q, ag) with q the 3-bit values of elements 16h + 4k.. (bits 2k,
// 2k+1 of v, the half's quant vector, and bit 4h + k of top, moved to bit 2) and ag token t's
// activation group.
template <class X, int h, int k, int R, int T, class F>
inline void q3_group(const typename X::I (&v)[R], const typename X::I (&top)[R],
                     const ActBlock* const* a, int64_t b, F& f) {
  using I = typename X::I;
  constexpr int p = 4 * h + k;  // the top bit's position in its byte
  I q[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    I lo = v[r], t2 = top[r];
    if constexpr (k > 0) lo = X::template srl32<2 * k>(v[r]);
    if constexpr (p < 2) {
      t2 = X::template sll32<2 - p>(top[r]);
    } else if constexpr (p > 2) {
      t2 = X::template srl32<p - 2>(top[r]);
    }
    q[r] = X::three(lo, t2);
  }
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const I ag = X::bcast4(a[t][b].qs + 16 * h + 4 * k);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) f(r, t, q[r], ag);
  }
}

template <class X, int h, int R, int T, class F>
inline void q3_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f) {
  using I = typename X::I;
  constexpr size_t kVec = 4 * X::kTile, kOff = Layout<X::kTile>::kTopQuants;
  I v[R], top[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    v[r] = X::load(wb[r] + kOff + h * kVec);
    top[r] = X::load(wb[r] + kOff + 2 * kVec);
  }
  q3_group<X, h, 0, R, T>(v, top, a, b, f);
  q3_group<X, h, 1, R, T>(v, top, a, b, f);
  q3_group<X, h, 2, R, T>(v, top, a, b, f);
  q3_group<X, h, 3, R, T>(v, top, a, b, f);
}

// Q6_H, Q5_M, Q3_H: the lanes start at -corr (half 0, Q5_M) or -corr_hi (half 1).
template <class X, int h, int R, int T>
inline void start_lanes(const ActBlock* const* a, int64_t b, typename X::I (&ia)[R][T]) {
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const typename X::I c = X::set1(-(h ? a[t][b].corr_hi : a[t][b].corr));
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) ia[r][t] = c;
  }
}

template <class X, int h, int R, int T>
inline void vnni_block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, h, R, T>(a, b, ia);
  q6_groups<X, h, 0, 4, R, T>(
      wb, a, b, [&](int r, int t, I q, I ag) { ia[r][t] = X::dpbusd(ia[r][t], q, ag); });
}

template <class X, int h, int R, int T>
inline void vnni_block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, h, R, T>(a, b, ia);
  q3_groups<X, h, R, T>(wb, a, b,
                        [&](int r, int t, I q, I ag) { ia[r][t] = X::dpbusd(ia[r][t], q, ag); });
}

// ia += the int16 pair sums of s16, widened (the maddubs dots' step between vector pairs).
template <class X, int R, int T>
inline void widen(const typename X::I (&s16)[R][T], typename X::I (&ia)[R][T]) {
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) ia[r][t] = X::add32(ia[r][t], X::madd1(s16[r][t]));
}

// Two vectors' products (pairs <= 16002) sum in int16, then widen: vectors 0-1, then 2-3.
template <class X, int h, int R, int T>
inline void maddubs_block6(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                           typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, h, R, T>(a, b, ia);
  I s16[R][T];
  const auto step = [&](int r, int t, I q, I ag) {
    s16[r][t] = X::add16(s16[r][t], X::maddubs(q, ag));
  };
  fill<X, R, T>(s16, X::zero());
  q6_groups<X, h, 0, 2, R, T>(wb, a, b, step);
  widen<X, R, T>(s16, ia);
  fill<X, R, T>(s16, X::zero());
  q6_groups<X, h, 2, 4, R, T>(wb, a, b, step);
  widen<X, R, T>(s16, ia);
}

// The half's four groups' products (pairs <= 1778) sum in int16, then widen.
template <class X, int h, int R, int T>
inline void maddubs_block3(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                           typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, h, R, T>(a, b, ia);
  I s16[R][T];
  fill<X, R, T>(s16, X::zero());
  q3_groups<X, h, R, T>(wb, a, b, [&](int r, int t, I q, I ag) {
    s16[r][t] = X::add16(s16[r][t], X::maddubs(q, ag));
  });
  widen<X, R, T>(s16, ia);
}

// Q5_M: f(r, t, lo, hi, alo, ahi) for quant vectors k0..k1-1 made 5-bit (vector k's low nibbles
// with bit k of the top-bit vector's bytes, its high nibbles with bit 4 + k) with token t's
// activation groups.
template <class X, int k0, int k1, int R, int T, class F>
inline void q5_groups(const uint8_t* const* wb, const ActBlock* const* a, int64_t b, F&& f) {
  using I = typename X::I;
  constexpr size_t kVec = 4 * X::kTile, kOff = Layout<X::kTile>::kTopQuants;
  // The top-bit vector shifted so that vector k's bits lie at bit 4: left by 4 - k for the low
  // nibbles (their bits 0-3 stay inside the dword), right by k for the high ones.
  I tlo[R], thi[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    thi[r] = X::load(wb[r] + kOff + 4 * kVec);
    tlo[r] = X::shl4(thi[r]);
    for (int k = 0; k < k0; ++k) {
      tlo[r] = X::shr1(tlo[r]);
      thi[r] = X::shr1(thi[r]);
    }
  }
#pragma GCC unroll 4
  for (int k = k0; k < k1; ++k) {
    I lo[R], hi[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      X::nibbles(X::load(wb[r] + kOff + k * kVec), lo[r], hi[r]);
      lo[r] = X::five(lo[r], tlo[r]);
      hi[r] = X::five(hi[r], thi[r]);
      tlo[r] = X::shr1(tlo[r]);
      thi[r] = X::shr1(thi[r]);
    }
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const I alo = X::bcast4(a[t][b].qs + 4 * k), ahi = X::bcast4(a[t][b].qs + 16 + 4 * k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) f(r, t, lo[r], hi[r], alo, ahi);
    }
  }
}

template <class X, int R, int T>
inline void vnni_block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                        typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, 0, R, T>(a, b, ia);  // -corr
  q5_groups<X, 0, 4, R, T>(wb, a, b, [&](int r, int t, I lo, I hi, I alo, I ahi) {
    ia[r][t] = X::dpbusd(X::dpbusd(ia[r][t], lo, alo), hi, ahi);
  });
}

// Two vectors' four products (pairs <= 7874) sum in int16, then widen: vectors 0-1, then 2-3.
template <class X, int R, int T>
inline void maddubs_block5(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                           typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, 0, R, T>(a, b, ia);  // -corr
  I s16[R][T];
  const auto step = [&](int r, int t, I lo, I hi, I alo, I ahi) {
    s16[r][t] = X::add16(s16[r][t], X::add16(X::maddubs(lo, alo), X::maddubs(hi, ahi)));
  };
  fill<X, R, T>(s16, X::zero());
  q5_groups<X, 0, 2, R, T>(wb, a, b, step);
  widen<X, R, T>(s16, ia);
  fill<X, R, T>(s16, X::zero());
  q5_groups<X, 2, 4, R, T>(wb, a, b, step);
  widen<X, R, T>(s16, ia);
}

template <class X, bool kQ4, int R, int T>
inline void vnni_block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                       typename X::I (&ia)[R][T]) {
  using I = typename X::I;
#pragma GCC unroll 16
  for (int t = 0; t < T; ++t) {
    const I c = X::set1(-a[t][b].corr);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) ia[r][t] = c;
  }
  if constexpr (kQ4) {
    q4_groups<X, R, T>(wb, a, b, [&](int r, int t, I lo, I hi, I alo, I ahi) {
      ia[r][t] = X::dpbusd(X::dpbusd(ia[r][t], lo, alo), hi, ahi);
    });
  } else {
    q8_groups<X, R, T>(wb, a, b,
                       [&](int r, int t, I w, I ag) { ia[r][t] = X::dpbusd(ia[r][t], w, ag); });
  }
}

template <class X, int R, int T>
inline void vnni_block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                           typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  start_lanes<X, 0, R, T>(a, b, ia);  // -corr
  iq4_groups<X, true, R, T>(wb, a, b, [&](int r, int t, I lo, I hi, I alo, I ahi) {
    ia[r][t] = X::dpbusd(X::dpbusd(ia[r][t], lo, alo), hi, ahi);
  });
}

template <class X, int R, int T>
inline void maddubs_block_iq4(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                              typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  fill<X, R, T>(ia, X::zero());
  iq4_groups<X, false, R, T>(wb, a, b, [&](int r, int t, I lo, I hi, I alo, I ahi) {
    const I plo = X::madd1(X::maddubs(X::abs8(lo), X::sign8(alo, lo)));
    const I phi = X::madd1(X::maddubs(X::abs8(hi), X::sign8(ahi, hi)));
    ia[r][t] = X::add32(ia[r][t], X::add32(plo, phi));
  });
}

template <class X, bool kQ4, int R, int T>
inline void maddubs_block(const uint8_t* const* wb, const ActBlock* const* a, int64_t b,
                          typename X::I (&ia)[R][T]) {
  using I = typename X::I;
  if constexpr (kQ4) {
    I s16[R][T];
    fill<X, R, T>(s16, X::zero());
    q4_groups<X, R, T>(wb, a, b, [&](int r, int t, I lo, I hi, I alo, I ahi) {
      s16[r][t] = X::add16(s16[r][t], X::maddubs(lo, alo));
      s16[r][t] = X::add16(s16[r][t], X::maddubs(hi, ahi));
    });
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const I c = X::set1(a[t][b].corr);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) ia[r][t] = X::sub32(X::madd1(s16[r][t]), c);
    }
  } else {
    fill<X, R, T>(ia, X::zero());
    q8_groups<X, R, T>(wb, a, b, [&](int r, int t, I w, I ag) {
      ia[r][t] = X::add32(ia[r][t], X::madd1(X::maddubs(X::abs8(w), X::sign8(ag, w))));
    });
  }
}

}  // namespace
}  // namespace krafla::kernels::tiled
