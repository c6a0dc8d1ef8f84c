// The F32 vector ops of the kernel table (rmsnorm, softmax, rope, swiglu, geglu, add, scale,
// axpy) and the exp polynomial under them, written once over per-ISA vector traits (the way
// gemma.cpp writes its ops once over Highway and ggml's vec.h over simd-mappings.h). Each SIMD
// TU defines its traits V and expands KRAFLA_VEC_MATH_ENTRIES(V) for the table entries; what
// an ISA does differently (FMA or not, masks or padded tails, NaN rules of min/max, how 2^n is
// formed) lives in its traits, so each ISA computes exactly the operations it always has: the
// generic code fixes the order of operations, the traits fix each operation.
//
// V provides, besides what delta_step.h asks for (F, width, zero, set1, load, store, load_n,
// store_n, mul, sub, fma):
//  * load_n(p, n, fill): the first min(n, width) floats at p, `fill` in the other lanes;
//  * add, div, neg, min, max: the ISA's instruction with the operands in this order (x86 and
//    Arm min/max treat NaN differently, x86 negates as 0 - x);
//  * fnma(a, b, c) = c - a*b, fused where fma is; mul_sub(a, b, c, d) = a*b - c*d with one
//    of the products fused (which one is the ISA's choice: vfmsub fuses a*b, vfms c*d);
//  * hsum, hmax: the ISA's horizontal reductions (their order is part of the result);
//  * max_n(acc, x, n), add_n(acc, x, n): acc op x in the first n lanes. Masked ISAs keep acc in
//    the others; padded ones (SSE, NEON) combine every lane, and their callers have filled
//    the lanes past n with the op's identity through load_n's fill;
//  * round(x) (to nearest, ties to even), kExpLo, kExpHi and exp_scale(y, n, x) = y * 2^n for
//    exp below, including what the ISA does for x < kExpLo.
// Included by ISA TUs only: every instantiation is on a type local to that TU.
#pragma once
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/delta_step.h"

namespace krafla::kernels::vec {

// Cephes' expf polynomial on r = x - n*ln2 (ln2 split in two for an exact product), 2^n by
// V::exp_scale. ~2 ulp. The clamp keeps n in the range where 2^n is a normal float (or where
// the ISA's scalef saturates), below it exp_scale gives 0.
template <class V>
inline typename V::F exp(typename V::F x) {
  using F = typename V::F;
  const F xc = V::min(V::max(x, V::set1(V::kExpLo)), V::set1(V::kExpHi));
  const F n = V::round(V::mul(xc, V::set1(1.44269504088896341f)));
  F r = V::fnma(n, V::set1(0.693359375f), xc);
  r = V::fnma(n, V::set1(-2.12194440e-4f), r);
  F p = V::set1(1.9875691500E-4f);
  p = V::fma(p, r, V::set1(1.3981999507E-3f));
  p = V::fma(p, r, V::set1(8.3334519073E-3f));
  p = V::fma(p, r, V::set1(4.1665795894E-2f));
  p = V::fma(p, r, V::set1(1.6666665459E-1f));
  p = V::fma(p, r, V::set1(5.0000001201E-1f));
  const F y = V::add(V::fma(p, V::mul(r, r), r), V::set1(1.0f));
  return V::exp_scale(y, n, x);
}

template <class V>
inline typename V::F silu(typename V::F g) {
  return V::div(g, V::add(V::set1(1.0f), exp<V>(V::neg(g))));
}

// 0.5*g*(1 + tanh(y)) == g / (1 + exp(-2y)), y = sqrt(2/pi)*(g + 0.044715 g^3): the sigmoid
// form has no cancellation for negative g (1 - 1/(e + 1) loses digits there).
template <class V>
inline typename V::F gelu(typename V::F g) {
  using F = typename V::F;
  const F g3 = V::mul(V::mul(g, g), g);
  const F y2 = V::mul(V::set1(-2.0f * 0.7978845608028654f), V::fma(V::set1(0.044715f), g3, g));
  return V::div(g, V::add(V::set1(1.0f), exp<V>(y2)));
}

template <class V>
void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {
  using F = typename V::F;
  const int64_t W = V::width();
  F ss = V::zero();
  for (int64_t i = 0; i < n; i += W) {
    const F v = V::load_n(x + i, n - i);
    ss = V::fma(v, v, ss);  // padding lanes add 0*0
  }
  const float scale = 1.0f / std::sqrt(V::hsum(ss) / float(n) + eps);
  const F vs = V::set1(scale);
  for (int64_t i = 0; i < n; i += W) {
    const F v = V::load_n(x + i, n - i);
    V::store_n(out + i, V::mul(V::mul(v, vs), V::load_n(w + i, n - i)), n - i);
  }
}

template <class V>
void axpy(float a, const float* x, float* y, int64_t n) {
  const typename V::F va = V::set1(a);
  for (int64_t i = 0; i < n; i += V::width())
    V::store_n(y + i, V::fma(va, V::load_n(x + i, n - i), V::load_n(y + i, n - i)), n - i);
}

// out += w[j] * v_j over the n rows in order, four vectors of out (then one) held in registers
// while the rows go by: per element the same fma sequence as n calls of axpy. (Named registers,
// not an array: SVE's sizeless vectors cannot form arrays.)
template <class V>
void axpy_rows(const float* w, const float* v, int64_t n, int64_t d, float* out) {
  using F = typename V::F;
  const int64_t W = V::width();
  int64_t c = 0;
  for (; c + 4 * W <= d; c += 4 * W) {
    F a0 = V::load(out + c), a1 = V::load(out + c + W);
    F a2 = V::load(out + c + 2 * W), a3 = V::load(out + c + 3 * W);
    for (int64_t j = 0; j < n; ++j) {
      const F x = V::set1(w[j]);
      const float* r = v + j * d + c;
      a0 = V::fma(x, V::load(r), a0);
      a1 = V::fma(x, V::load(r + W), a1);
      a2 = V::fma(x, V::load(r + 2 * W), a2);
      a3 = V::fma(x, V::load(r + 3 * W), a3);
    }
    V::store(out + c, a0);
    V::store(out + c + W, a1);
    V::store(out + c + 2 * W, a2);
    V::store(out + c + 3 * W, a3);
  }
  for (; c < d; c += W) {
    F acc = V::load_n(out + c, d - c);
    for (int64_t j = 0; j < n; ++j)
      acc = V::fma(V::set1(w[j]), V::load_n(v + j * d + c, d - c), acc);
    V::store_n(out + c, acc, d - c);
  }
}

// dot_f32 of the x86 tables before its horizontal sum: W lane sums, in two accumulators over
// 2W-float steps (the tail into the first), so that one reduction of it is dot_f32 and a
// reduction of several at once (dot_rows) gives the same bits.
template <class V>
typename V::F dot_lanes(const float* a, const float* b, int64_t n) {
  using F = typename V::F;
  const int64_t W = V::width();
  F s0 = V::zero(), s1 = V::zero();
  int64_t i = 0;
  for (; i + 2 * W <= n; i += 2 * W) {
    s0 = V::fma(V::load(a + i), V::load(b + i), s0);
    s1 = V::fma(V::load(a + i + W), V::load(b + i + W), s1);
  }
  for (; i < n; i += W) s0 = V::fma(V::load_n(a + i, n - i), V::load_n(b + i, n - i), s0);
  return V::add(s0, s1);
}

// Attention's V rows as the cache stores them: floats, or IEEE halves widened by the traits'
// load_half. Widening is exact, so a loop over halves gives the bits of f16_to_f32 followed by
// the same loop over floats.
template <class V>
inline typename V::F load_row(const float* p) {
  return V::load(p);
}
template <class V>
inline typename V::F load_row(const uint16_t* p) {
  return V::load_half(p);
}

// axpy_rows for G query rows (scores at stride ld_w, outputs at stride d) over the column
// chunk of four vectors at c: each v row's four vectors are loaded once for the G rows and
// pinned in registers (V::pin: x86 compilers otherwise fold a load into every fma, and the
// loads, not the fmas, set the pace). Each row's lanes take axpy's fma sequence, whatever G is.
// For traits whose vectors form arrays (not SVE's).
template <class V, int G, class T>
void axpy_rows_chunk(const float* w, int64_t ld_w, const T* v, int64_t n, int64_t d, int64_t c,
                     float* out) {
  using F = typename V::F;
  const int64_t W = V::width();
  F acc[G][4];
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) acc[i][u] = V::load(out + i * d + c + u * W);
  for (int64_t j = 0; j < n; ++j) {
    const T* r = v + j * d + c;
    F r0 = load_row<V>(r), r1 = load_row<V>(r + W), r2 = load_row<V>(r + 2 * W);
    F r3 = load_row<V>(r + 3 * W);
    V::pin(r0, r1, r2, r3);
#pragma GCC unroll 4
    for (int i = 0; i < G; ++i) {
      const F x = V::set1(w[i * ld_w + j]);
      acc[i][0] = V::fma(x, r0, acc[i][0]);
      acc[i][1] = V::fma(x, r1, acc[i][1]);
      acc[i][2] = V::fma(x, r2, acc[i][2]);
      acc[i][3] = V::fma(x, r3, acc[i][3]);
    }
  }
#pragma GCC unroll 4
  for (int i = 0; i < G; ++i)
#pragma GCC unroll 4
    for (int u = 0; u < 4; ++u) V::store(out + i * d + c + u * W, acc[i][u]);
}

// axpy_rows_f32 (the table's contract) in groups of up to kMaxG query rows per v-row load
// (axpy_rows_chunk) where d is a multiple of four vectors, else row by row (rows of halves:
// d must be such a multiple).
template <class V, int kMaxG, class T>
void axpy_rows_grouped(const float* w, int64_t ld_w, int64_t g, const T* v, int64_t n, int64_t d,
                       float* out) {
  const int64_t chunk = 4 * V::width();
  if constexpr (std::is_same_v<T, float>) {
    if (d % chunk != 0) {
      for (int64_t i = 0; i < g; ++i) axpy_rows<V>(w + i * ld_w, v, n, d, out + i * d);
      return;
    }
  }
  for (int64_t c = 0; c < d; c += chunk) {
    int64_t i = 0;
    for (; i + kMaxG <= g; i += kMaxG)
      axpy_rows_chunk<V, kMaxG, T>(w + i * ld_w, ld_w, v, n, d, c, out + i * d);
    const auto rest = [&]<int G>() {
      if (g - i == G) axpy_rows_chunk<V, G, T>(w + i * ld_w, ld_w, v, n, d, c, out + i * d);
    };
    if constexpr (kMaxG > 3) rest.template operator()<3>();
    if constexpr (kMaxG > 2) rest.template operator()<2>();
    if constexpr (kMaxG > 1) rest.template operator()<1>();
  }
}

// The table's row loops: the ISA's own (V::dot_rows, V::axpy_rows, bitwise these) where its
// traits have one, else these loops of the single calls.
template <class V, class Dot>
void dot_rows(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale,
              float* out, int64_t ld_out, Dot dot) {
  if constexpr (requires { V::dot_rows(q, g, k, n, d, scale, out, ld_out); }) {
    V::dot_rows(q, g, k, n, d, scale, out, ld_out);
  } else {
    for (int64_t i = 0; i < g; ++i)
      for (int64_t j = 0; j < n; ++j) out[i * ld_out + j] = dot(q + i * d, k + j * d, d) * scale;
  }
}

template <class V>
void axpy_rows(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n, int64_t d,
               float* out) {
  if constexpr (requires { V::axpy_rows(w, ld_w, g, v, n, d, out); }) {
    V::axpy_rows(w, ld_w, g, v, n, d, out);
  } else {
    for (int64_t i = 0; i < g; ++i) axpy_rows<V>(w + i * ld_w, v, n, d, out + i * d);
  }
}

// The row loops on rows of halves where the traits have their own (V::dot_rows_half,
// V::axpy_rows_half: false for a shape they do not take); false otherwise, and the table
// entries convert the rows first (KRAFLA_VEC_MATH_ENTRIES).
template <class V>
bool dot_rows_half(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d, float scale,
                   float* out, int64_t ld_out, float* buf) {
  if constexpr (requires { V::dot_rows_half(q, g, k, n, d, scale, out, ld_out, buf); })
    return V::dot_rows_half(q, g, k, n, d, scale, out, ld_out, buf);
  return false;
}

template <class V>
bool axpy_rows_half(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n,
                    int64_t d, float* out) {
  if constexpr (requires { V::axpy_rows_half(w, ld_w, g, v, n, d, out); })
    return V::axpy_rows_half(w, ld_w, g, v, n, d, out);
  return false;
}

template <class V>
void scale(float* x, float s, int64_t n) {
  const typename V::F vs = V::set1(s);
  for (int64_t i = 0; i < n; i += V::width())
    V::store_n(x + i, V::mul(V::load_n(x + i, n - i), vs), n - i);
}

template <class V>
void add(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += V::width()) {
    const typename V::F va = V::load_n(a + i, n - i), vb = V::load_n(b + i, n - i);
    V::store_n(out + i, V::add(va, vb), n - i);
  }
}

template <class V>
float softmax(float* x, int64_t n) {
  using F = typename V::F;
  if (n <= 0) return 0.0f;
  const int64_t W = V::width();
  // Lanes past the end read -inf: they leave the max alone and their exp is 0.
  F mx = V::set1(-INFINITY);
  for (int64_t i = 0; i < n; i += W) mx = V::max_n(mx, V::load_n(x + i, n - i, -INFINITY), n - i);
  const F vmax = V::set1(V::hmax(mx));
  F sum = V::zero();
  for (int64_t i = 0; i < n; i += W) {
    const F e = exp<V>(V::sub(V::load_n(x + i, n - i, -INFINITY), vmax));
    V::store_n(x + i, e, n - i);
    sum = V::add_n(sum, e, n - i);
  }
  const float total = V::hsum(sum);
  scale<V>(x, 1.0f / total, n);
  return total;
}

template <class V>
void swiglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += V::width())
    V::store_n(out + i, V::mul(silu<V>(V::load_n(gate + i, n - i)), V::load_n(up + i, n - i)),
               n - i);
}

template <class V>
void geglu(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; i += V::width())
    V::store_n(out + i, V::mul(gelu<V>(V::load_n(gate + i, n - i)), V::load_n(up + i, n - i)),
               n - i);
}

template <class V>
void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos,
          const float* sin) {
  using F = typename V::F;
  const int64_t half = rot_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* x0p = x + h * head_dim;
    float* x1p = x0p + half;
    for (int64_t i = 0; i < half; i += V::width()) {
      const int64_t k = half - i;
      const F x0 = V::load_n(x0p + i, k), x1 = V::load_n(x1p + i, k);
      const F c = V::load_n(cos + i, k), s = V::load_n(sin + i, k);
      V::store_n(x0p + i, V::mul_sub(x0, c, x1, s), k);
      V::store_n(x1p + i, V::fma(x0, s, V::mul(x1, c)), k);
    }
  }
}

}  // namespace krafla::kernels::vec

// The table entries written above (and delta_step.h's), for a TU whose traits are V.
#define KRAFLA_VEC_MATH_ENTRIES(V)                                                                \
  void rmsnorm(const float* x, const float* w, float eps, float* out, int64_t n) {                \
    vec::rmsnorm<V>(x, w, eps, out, n);                                                           \
  }                                                                                               \
  void axpy_f32(float a, const float* x, float* y, int64_t n) { vec::axpy<V>(a, x, y, n); }       \
  void dot_rows_f32(const float* q, int64_t g, const float* k, int64_t n, int64_t d, float scale, \
                    float* out, int64_t ld_out) {                                                 \
    vec::dot_rows<V>(q, g, k, n, d, scale, out, ld_out, dot_f32);                                 \
  }                                                                                               \
  void axpy_rows_f32(const float* w, int64_t ld_w, int64_t g, const float* v, int64_t n,          \
                     int64_t d, float* out) {                                                     \
    vec::axpy_rows<V>(w, ld_w, g, v, n, d, out);                                                  \
  }                                                                                               \
  void dot_rows_f16(const float* q, int64_t g, const uint16_t* k, int64_t n, int64_t d,           \
                    float scale, float* out, int64_t ld_out, float* buf) {                        \
    if (vec::dot_rows_half<V>(q, g, k, n, d, scale, out, ld_out, buf)) return;                    \
    f16_to_f32(k, buf, n* d);                                                                     \
    dot_rows_f32(q, g, buf, n, d, scale, out, ld_out);                                            \
  }                                                                                               \
  void axpy_rows_f16(const float* w, int64_t ld_w, int64_t g, const uint16_t* v, int64_t n,       \
                     int64_t d, float* out, float* buf) {                                         \
    if (vec::axpy_rows_half<V>(w, ld_w, g, v, n, d, out)) return;                                 \
    f16_to_f32(v, buf, n* d);                                                                     \
    axpy_rows_f32(w, ld_w, g, buf, n, d, out);                                                    \
  }                                                                                               \
  void scale_f32(float* x, float s, int64_t n) { vec::scale<V>(x, s, n); }                        \
  void add_f32(const float* a, const float* b, float* out, int64_t n) {                           \
    vec::add<V>(a, b, out, n);                                                                    \
  }                                                                                               \
  float softmax(float* x, int64_t n) { return vec::softmax<V>(x, n); }                            \
  void swiglu(const float* gate, const float* up, float* out, int64_t n) {                        \
    vec::swiglu<V>(gate, up, out, n);                                                             \
  }                                                                                               \
  void geglu(const float* gate, const float* up, float* out, int64_t n) {                         \
    vec::geglu<V>(gate, up, out, n);                                                              \
  }                                                                                               \
  void rope(float* x, int64_t n_heads, int64_t head_dim, int64_t rot_dim, const float* cos,       \
            const float* sin) {                                                                   \
    vec::rope<V>(x, n_heads, head_dim, rot_dim, cos, sin);                                        \
  }                                                                                               \
  void delta_step(float* S, const float* q, const float* k, const float* v, float decay,          \
                  float beta, int64_t dk, int64_t dv, float* out) {                               \
    detail::delta_step<V>(S, q, k, v, decay, beta, dk, dv, out);                                  \
  }
