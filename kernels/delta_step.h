// The gated delta rule step (kernels.h: delta_step) written once over a small vector interface,
// instantiated by each SIMD table with its own registers and tail handling. Included by ISA TUs
// only: every instantiation is on a type local to that TU.
//
// The columns of the state are independent, so the step runs strip by strip: for 4 vectors of
// columns, pass 1 decays the strip and reads p = S^T k, then d = beta (v - p) stays in
// registers while pass 2 adds k d^T and reads q^T S with the strip still in L1. The state
// (k_dim x v_dim floats, 64 KiB for Qwen3.5) is read and written once per token instead of
// twice, and the four accumulators are four independent FMA chains.
//
// V provides: type F; width() (floats per vector, may be a run-time value: SVE); zero();
// set1(float); load(p); store(p, x); load_n(p, n) / store_n(p, x, n) (the first min(n, width)
// floats); mul(a, b); sub(a, b); fma(a, b, c) = a*b + c (fused or not).
#pragma once
#include <cstdint>

namespace krafla::kernels::detail {

template <class V>
void delta_step(float* S, const float* q, const float* k, const float* v, float decay, float beta,
                int64_t dk, int64_t dv, float* out) {
  using F = typename V::F;
  const int64_t W = V::width();
  const F vdecay = V::set1(decay), vbeta = V::set1(beta);
  int64_t j = 0;
  // Named registers rather than arrays: SVE vectors are sizeless and cannot be array elements.
  for (; j + 4 * W <= dv; j += 4 * W) {
    F p0 = V::zero(), p1 = V::zero(), p2 = V::zero(), p3 = V::zero();
    for (int64_t i = 0; i < dk; ++i) {
      float* s = S + i * dv + j;
      const F ki = V::set1(k[i]);
      const F x0 = V::mul(V::load(s), vdecay), x1 = V::mul(V::load(s + W), vdecay);
      const F x2 = V::mul(V::load(s + 2 * W), vdecay), x3 = V::mul(V::load(s + 3 * W), vdecay);
      V::store(s, x0), V::store(s + W, x1), V::store(s + 2 * W, x2), V::store(s + 3 * W, x3);
      p0 = V::fma(ki, x0, p0), p1 = V::fma(ki, x1, p1);
      p2 = V::fma(ki, x2, p2), p3 = V::fma(ki, x3, p3);
    }
    const F d0 = V::mul(vbeta, V::sub(V::load(v + j), p0));
    const F d1 = V::mul(vbeta, V::sub(V::load(v + j + W), p1));
    const F d2 = V::mul(vbeta, V::sub(V::load(v + j + 2 * W), p2));
    const F d3 = V::mul(vbeta, V::sub(V::load(v + j + 3 * W), p3));
    F o0 = V::zero(), o1 = V::zero(), o2 = V::zero(), o3 = V::zero();
    for (int64_t i = 0; i < dk; ++i) {
      float* s = S + i * dv + j;
      const F ki = V::set1(k[i]), qi = V::set1(q[i]);
      const F x0 = V::fma(ki, d0, V::load(s)), x1 = V::fma(ki, d1, V::load(s + W));
      const F x2 = V::fma(ki, d2, V::load(s + 2 * W)), x3 = V::fma(ki, d3, V::load(s + 3 * W));
      V::store(s, x0), V::store(s + W, x1), V::store(s + 2 * W, x2), V::store(s + 3 * W, x3);
      o0 = V::fma(qi, x0, o0), o1 = V::fma(qi, x1, o1);
      o2 = V::fma(qi, x2, o2), o3 = V::fma(qi, x3, o3);
    }
    V::store(out + j, o0), V::store(out + j + W, o1);
    V::store(out + j + 2 * W, o2), V::store(out + j + 3 * W, o3);
  }
  for (; j < dv; j += W) {  // the last columns, one vector (or part of one) at a time
    const int64_t m = dv - j;
    F p = V::zero();
    for (int64_t i = 0; i < dk; ++i) {
      float* s = S + i * dv + j;
      const F x = V::mul(V::load_n(s, m), vdecay);
      V::store_n(s, x, m);
      p = V::fma(V::set1(k[i]), x, p);
    }
    const F d = V::mul(vbeta, V::sub(V::load_n(v + j, m), p));
    F o = V::zero();
    for (int64_t i = 0; i < dk; ++i) {
      float* s = S + i * dv + j;
      const F x = V::fma(V::set1(k[i]), d, V::load_n(s, m));
      V::store_n(s, x, m);
      o = V::fma(V::set1(q[i]), x, o);
    }
    V::store_n(out + j, o, m);
  }
}

}  // namespace krafla::kernels::detail
