// Vector ops, conversions and quantization: built ISA and scalar against double references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <numbers>

#include "test_util.h"

namespace krafla::kernels {
namespace {

using test::random_floats;

constexpr int64_t kLens[] = {1, 2, 3, 5, 7, 15, 17, 31, 33, 63, 65, 127, 255, 1023};

// Elementwise ops built from one exp/tanh: a few ulp from the polynomial exp plus the roundings
// of the surrounding multiplies and the division; 2e-6 relative leaves a 10x margin over the
// observed ~4 ulp; the absolute floor is for results that underflow towards 0.
constexpr double kElemRel = 2e-6, kElemAbs = 1e-7;
// Reductions over n terms in float (any order): n * 2^-24 * sum|terms| bounds the error.
double reduction_tol(int64_t n, double abs_sum) {
  return double(n + 1) * std::ldexp(1.0, -24) * abs_sum + 1e-30;
}

bool close(double got, double ref, double rel, double abs) {
  return std::fabs(got - ref) <= rel * std::fabs(ref) + abs;
}

using UnaryPair = void (*)(const float*, const float*, float*, int64_t);

void check_glu(UnaryPair isa, UnaryPair sc, double (*ref)(double)) {
  std::mt19937 rng(3);
  for (int64_t n : kLens) {
    auto g = random_floats(rng, n, -12.0f, 12.0f);
    if (n > 4) g[0] = -100.0f, g[1] = 100.0f, g[2] = 0.0f, g[3] = 1e-8f;
    const auto u = random_floats(rng, n, -3.0f, 3.0f);
    std::vector<float> a(n), b(n);
    isa(g.data(), u.data(), a.data(), n);
    sc(g.data(), u.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double r = ref(g[i]) * u[i];
      EXPECT_TRUE(close(a[i], r, kElemRel, kElemAbs * std::fabs(u[i])))
          << "isa n=" << n << " g=" << g[i] << " got " << a[i] << " ref " << r;
      EXPECT_TRUE(close(b[i], r, kElemRel, kElemAbs * std::fabs(u[i])))
          << "scalar n=" << n << " g=" << g[i] << " got " << b[i] << " ref " << r;
    }
  }
}

double silu_ref(double g) { return g / (1.0 + std::exp(-g)); }
double gelu_ref(double g) {
  return 0.5 * g *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (g + 0.044715 * g * g * g)));
}

TEST(Vector, Swiglu) { check_glu(swiglu, scalar::swiglu, silu_ref); }
TEST(Vector, Geglu) { check_glu(geglu, scalar::geglu, gelu_ref); }

TEST(Vector, Rmsnorm) {
  std::mt19937 rng(4);
  for (int64_t n : kLens) {
    const auto x = random_floats(rng, n, -3.0f, 3.0f);
    const auto w = random_floats(rng, n, -1.0f, 1.0f);
    const float eps = 1e-6f;
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double s = 1.0 / std::sqrt(ss / n + eps);
    std::vector<float> a(n), b(x);
    rmsnorm(x.data(), w.data(), eps, a.data(), n);
    scalar::rmsnorm(b.data(), w.data(), eps, b.data(), n);  // in place
    for (int64_t i = 0; i < n; ++i) {
      const double r = x[i] * s * double(w[i]);
      // sum of squares (reduction, relative n*2^-24), sqrt, then two roundings.
      const double rel = (n + 8) * std::ldexp(1.0, -24);
      EXPECT_TRUE(close(a[i], r, rel, 1e-30)) << "isa n=" << n << " i=" << i;
      EXPECT_TRUE(close(b[i], r, rel, 1e-30)) << "scalar n=" << n << " i=" << i;
    }
  }
}

TEST(Vector, Softmax) {
  std::mt19937 rng(5);
  for (float scale : {1.0f, 100.0f, 1e4f}) {
    for (float shift : {0.0f, -1e4f, 80.0f, 1e4f}) {
      for (int64_t n : kLens) {
        auto x = random_floats(rng, n, -scale, scale);
        for (auto& v : x) v += shift;
        const float mx = *std::max_element(x.begin(), x.end());
        double sum = 0;
        for (float v : x) sum += std::exp(double(v) - mx);
        std::vector<float> a(x), b(x);
        const float sa = softmax(a.data(), n), sb = scalar::softmax(b.data(), n);
        // Each exp ~ few ulp; the sum is a reduction; the normalisation one more rounding.
        const double rel = kElemRel + (n + 2) * std::ldexp(1.0, -24);
        EXPECT_TRUE(close(sa, sum, rel, 0)) << "isa n=" << n << " sum " << sa << " ref " << sum;
        EXPECT_TRUE(close(sb, sum, rel, 0)) << "scalar n=" << n;
        for (int64_t i = 0; i < n; ++i) {
          const double r = std::exp(double(x[i]) - mx) / sum;
          EXPECT_TRUE(close(a[i], r, rel, 1e-37)) << "isa n=" << n << " x=" << x[i];
          EXPECT_TRUE(close(b[i], r, rel, 1e-37)) << "scalar n=" << n << " x=" << x[i];
        }
      }
    }
  }
}

// Attention's row loops (dot_rows_f32, axpy_rows_f32) compute bit for bit what the dot_f32 /
// axpy_f32 calls they replace do, in the built ISA and in scalar, for any number of query rows
// at once: the results of attention do not change with how its keys or heads are blocked.
TEST(Vector, RowLoopsEqualTheirCalls) {
  std::mt19937 rng(8);
  for (int64_t d : {1, 7, 16, 33, 48, 64, 100, 128, 129, 256}) {
    for (int64_t n : {0, 1, 5, 16, 17, 40}) {
      const int64_t g = 1 + (d + n) % 7, ld_w = n + 3;  // query rows, score row stride
      const auto q = random_floats(rng, g * d, -2.0f, 2.0f);
      const auto k = random_floats(rng, n * d, -2.0f, 2.0f);
      const auto w = random_floats(rng, g * ld_w, -1.0f, 1.0f);
      const auto out0 = random_floats(rng, g * d, -1.0f, 1.0f);
      std::vector<float> s(g * ld_w), s_sc(g * ld_w), o(out0), o_sc(out0), want(out0),
          want_sc(out0);
      dot_rows_f32(q.data(), g, k.data(), n, d, 0.125f, s.data(), ld_w);
      scalar::dot_rows_f32(q.data(), g, k.data(), n, d, 0.125f, s_sc.data(), ld_w);
      axpy_rows_f32(w.data(), ld_w, g, k.data(), n, d, o.data());
      scalar::axpy_rows_f32(w.data(), ld_w, g, k.data(), n, d, o_sc.data());
      for (int64_t j = 0; j < n; ++j) {
        const float* kj = k.data() + j * d;
        for (int64_t i = 0; i < g; ++i) {
          const float* qi = q.data() + i * d;
          ASSERT_EQ(s[i * ld_w + j], dot_f32(qi, kj, d) * 0.125f)
              << "d=" << d << " n=" << n << " g=" << g;
          ASSERT_EQ(s_sc[i * ld_w + j], scalar::dot_f32(qi, kj, d) * 0.125f);
          axpy_f32(w[i * ld_w + j], kj, want.data() + i * d, d);
          scalar::axpy_f32(w[i * ld_w + j], kj, want_sc.data() + i * d, d);
        }
      }
      for (int64_t i = 0; i < g * d; ++i) {
        ASSERT_EQ(o[i], want[i]) << "d=" << d << " n=" << n << " g=" << g << " i=" << i;
        ASSERT_EQ(o_sc[i], want_sc[i]) << "d=" << d << " n=" << n << " g=" << g << " i=" << i;
      }
    }
  }
}

// dot_rows_f16 and axpy_rows_f16 (an F16 KV cache's rows, widened as they load where the ISA
// can) compute bit for bit what widening the rows with f16_to_f32 and calling the F32 loops
// does: for head sizes the ISAs' own loops take (multiples of 32 and 64 floats; 64, 128 and
// 256 for AVX-512's dot) and those converted first, query-row counts on both sides of each
// ISA's limits, and key counts below, at and past the 16-key blocks.
TEST(Vector, HalfRowLoopsEqualWidenedRows) {
  std::mt19937 rng(9);
  for (int64_t d : {7, 32, 64, 96, 100, 128, 256}) {
    for (int64_t n : {0, 1, 5, 32, 40}) {
      for (int64_t g : {1, 2, 3, 4, 7, 8, 9}) {
        const int64_t ld_w = n + 3;
        std::vector<uint16_t> v(n * d);
        f32_to_f16(random_floats(rng, n * d, -2.0f, 2.0f).data(), v.data(), n * d);
        const auto q = random_floats(rng, g * d, -2.0f, 2.0f);
        const auto w = random_floats(rng, g * ld_w, -1.0f, 1.0f);
        const auto out0 = random_floats(rng, g * d, -1.0f, 1.0f);
        std::vector<float> wide(n * d), buf(n * d + 1), o(out0), o_sc(out0), want(out0),
            want_sc(out0), s(g * ld_w), s_sc(g * ld_w), s_want(g * ld_w), s_want_sc(g * ld_w);
        scalar::f16_to_f32(v.data(), wide.data(), n * d);
        dot_rows_f16(q.data(), g, v.data(), n, d, 0.125f, s.data(), ld_w, buf.data());
        scalar::dot_rows_f16(q.data(), g, v.data(), n, d, 0.125f, s_sc.data(), ld_w, buf.data());
        dot_rows_f32(q.data(), g, wide.data(), n, d, 0.125f, s_want.data(), ld_w);
        scalar::dot_rows_f32(q.data(), g, wide.data(), n, d, 0.125f, s_want_sc.data(), ld_w);
        axpy_rows_f16(w.data(), ld_w, g, v.data(), n, d, o.data(), buf.data());
        scalar::axpy_rows_f16(w.data(), ld_w, g, v.data(), n, d, o_sc.data(), buf.data());
        axpy_rows_f32(w.data(), ld_w, g, wide.data(), n, d, want.data());
        scalar::axpy_rows_f32(w.data(), ld_w, g, wide.data(), n, d, want_sc.data());
        const auto at = [&](int64_t i) {
          return ::testing::Message() << "d=" << d << " n=" << n << " g=" << g << " i=" << i;
        };
        for (int64_t i = 0; i < g; ++i)
          for (int64_t j = 0; j < n; ++j) {
            ASSERT_EQ(s[i * ld_w + j], s_want[i * ld_w + j]) << at(i * ld_w + j);
            ASSERT_EQ(s_sc[i * ld_w + j], s_want_sc[i * ld_w + j]) << at(i * ld_w + j);
          }
        for (int64_t i = 0; i < g * d; ++i) {
          ASSERT_EQ(o[i], want[i]) << at(i);
          ASSERT_EQ(o_sc[i], want_sc[i]) << at(i);
        }
      }
    }
  }
}

TEST(Vector, DotAxpyScaleAdd) {
  std::mt19937 rng(6);
  for (int64_t n : kLens) {
    const auto x = random_floats(rng, n, -2.0f, 2.0f);
    const auto y = random_floats(rng, n, -2.0f, 2.0f);
    double ref = 0, abs_sum = 0;
    for (int64_t i = 0; i < n; ++i) ref += double(x[i]) * y[i], abs_sum += std::fabs(x[i] * y[i]);
    EXPECT_NEAR(dot_f32(x.data(), y.data(), n), ref, reduction_tol(n, abs_sum)) << n;
    EXPECT_NEAR(scalar::dot_f32(x.data(), y.data(), n), ref, reduction_tol(n, abs_sum)) << n;

    // axpy: one fused or two separate roundings.
    std::vector<float> a(y), b(y);
    axpy_f32(0.75f, x.data(), a.data(), n);
    scalar::axpy_f32(0.75f, x.data(), b.data(), n);
    for (int64_t i = 0; i < n; ++i) {
      const double r = y[i] + 0.75 * x[i];
      const double tol = std::ldexp(1.0, -23) * (std::fabs(y[i]) + std::fabs(0.75 * x[i]));
      EXPECT_NEAR(a[i], r, tol);
      EXPECT_NEAR(b[i], r, tol);
    }
    // scale and add are single correctly rounded operations: exact agreement.
    std::vector<float> c(x), d(x);
    scale_f32(c.data(), 1.5f, n);
    scalar::scale_f32(d.data(), 1.5f, n);
    EXPECT_EQ(0, std::memcmp(c.data(), d.data(), 4 * n));
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(c[i], x[i] * 1.5f);
    add_f32(x.data(), y.data(), c.data(), n);
    scalar::add_f32(x.data(), y.data(), d.data(), n);
    for (int64_t i = 0; i < n; ++i) EXPECT_EQ(c[i], x[i] + y[i]);
    EXPECT_EQ(0, std::memcmp(c.data(), d.data(), 4 * n));
    std::vector<float> e(x);
    add_f32(e.data(), y.data(), e.data(), n);  // aliasing
    EXPECT_EQ(0, std::memcmp(c.data(), e.data(), 4 * n));
  }
}

// One token of the gated delta rule in double from the state `S` as given, with a bound on the
// float error of each result: reductions (dk terms) as in reduction_tol, plus what the error of
// d = beta (v - S^T k) carries into S and out. Fused or separate multiply-adds both fit.
struct DeltaRef {
  std::vector<double> S, S_tol, out, out_tol;
};
DeltaRef delta_ref(const std::vector<float>& S, const std::vector<float>& q,
                   const std::vector<float>& k, const std::vector<float>& v, float decay,
                   float beta, int64_t dk, int64_t dv) {
  const double u = std::ldexp(1.0, -24);
  DeltaRef r{std::vector<double>(dk * dv), std::vector<double>(dk * dv), std::vector<double>(dv),
             std::vector<double>(dv)};
  for (int64_t j = 0; j < dv; ++j) {
    double p = 0, p_abs = 0;
    for (int64_t i = 0; i < dk; ++i) {
      const double x = double(S[i * dv + j]) * decay;
      p += k[i] * x, p_abs += std::fabs(k[i] * x);
    }
    const double d = beta * (v[j] - p);
    const double d_err =
        beta * (2 * (dk + 2) * u * p_abs + 2 * u * (std::fabs(v[j]) + std::fabs(p)));
    double o = 0, o_abs = 0, o_err = 0;
    for (int64_t i = 0; i < dk; ++i) {
      const double x = double(S[i * dv + j]) * decay, s = x + k[i] * d;
      const double s_err = 2 * u * (std::fabs(x) + std::fabs(k[i] * d)) + std::fabs(k[i]) * d_err;
      r.S[i * dv + j] = s, r.S_tol[i * dv + j] = 2 * s_err + 1e-30;
      o += q[i] * s, o_abs += std::fabs(q[i] * s), o_err += std::fabs(q[i]) * s_err;
    }
    r.out[j] = o, r.out_tol[j] = 2 * ((dk + 1) * u * o_abs + o_err) + 1e-30;
  }
  return r;
}

TEST(Vector, DeltaStep) {
  std::mt19937 rng(11);
  using Fn = void (*)(float*, const float*, const float*, const float*, float, float, int64_t,
                      int64_t, float*);
  const std::pair<Fn, const char*> impls[] = {{delta_step, "isa"}, {scalar::delta_step, "scalar"}};
  // Qwen3.5's 128 x 128, and shapes that leave every kind of tail (strips of 4 vectors of up
  // to 16 floats, single vectors, partial vectors).
  const std::pair<int64_t, int64_t> shapes[] = {{1, 1},     {3, 5},    {16, 16}, {8, 67},
                                                {128, 128}, {64, 100}, {5, 129}, {2, 200}};
  for (auto [dk, dv] : shapes) {
    for (auto [fn, name] : impls) {
      auto S = random_floats(rng, dk * dv, -1.0f, 1.0f);
      for (int step = 0; step < 3; ++step) {  // the state carries over from step to step
        const auto q = random_floats(rng, dk, -0.3f, 0.3f);
        const auto k = random_floats(rng, dk, -0.3f, 0.3f);
        const auto v = random_floats(rng, dv, -2.0f, 2.0f);
        const float decay = std::uniform_real_distribution<float>(0.3f, 1.0f)(rng);
        const float beta = std::uniform_real_distribution<float>(0.1f, 1.0f)(rng);
        const DeltaRef ref = delta_ref(S, q, k, v, decay, beta, dk, dv);
        std::vector<float> out(dv + 1, 7.0f);  // one float past the end must stay untouched
        fn(S.data(), q.data(), k.data(), v.data(), decay, beta, dk, dv, out.data());
        EXPECT_EQ(out[dv], 7.0f) << name << " wrote past out[" << dv << "]";
        for (int64_t j = 0; j < dv; ++j)
          ASSERT_NEAR(out[j], ref.out[j], ref.out_tol[j])
              << name << " dk=" << dk << " dv=" << dv << " step " << step << " out[" << j << "]";
        for (int64_t e = 0; e < dk * dv; ++e)
          ASSERT_NEAR(S[e], ref.S[e], ref.S_tol[e])
              << name << " dk=" << dk << " dv=" << dv << " step " << step << " S[" << e << "]";
      }
    }
  }
}

TEST(Vector, Rope) {
  std::mt19937 rng(7);
  for (auto [head_dim, rot_dim] :
       {std::pair<int64_t, int64_t>{64, 64}, {64, 32}, {128, 64}, {80, 40}, {96, 34}, {256, 128}}) {
    const int64_t n_heads = 3;
    const auto x = random_floats(rng, n_heads * head_dim, -2.0f, 2.0f);
    std::vector<float> cs(rot_dim / 2), sn(rot_dim / 2);
    std::vector<double> angle(rot_dim / 2);
    for (int64_t i = 0; i < rot_dim / 2; ++i) {
      angle[i] = 17.0 * std::pow(10000.0, -2.0 * i / rot_dim);  // position 17
      cs[i] = float(std::cos(angle[i]));
      sn[i] = float(std::sin(angle[i]));
    }
    std::vector<float> a(x), b(x);
    rope(a.data(), n_heads, head_dim, rot_dim, cs.data(), sn.data());
    scalar::rope(b.data(), n_heads, head_dim, rot_dim, cs.data(), sn.data());
    for (int64_t h = 0; h < n_heads; ++h) {
      const float* xh = &x[h * head_dim];
      for (int64_t i = 0; i < head_dim; ++i) {
        double r = xh[i];
        const int64_t half = rot_dim / 2;
        if (i < half)
          r = xh[i] * double(cs[i]) - xh[i + half] * double(sn[i]);
        else if (i < rot_dim)
          r = xh[i - half] * double(sn[i - half]) + xh[i] * double(cs[i - half]);
        const size_t k = h * head_dim + i;
        if (i >= rot_dim) {
          EXPECT_EQ(a[k], xh[i]);  // untouched, bitwise
          EXPECT_EQ(b[k], xh[i]);
        } else {
          // Two products and a sum: <= 3 roundings of terms bounded by |x0|+|x1|.
          const double tol = 3 * std::ldexp(1.0, -24) * (std::fabs(xh[i]) + 4.0);
          EXPECT_NEAR(a[k], r, tol) << "isa h=" << h << " i=" << i;
          EXPECT_NEAR(b[k], r, tol) << "scalar h=" << h << " i=" << i;
        }
      }
    }
  }
}

// Every half: the exact value from the definition, scalar == ISA bitwise, and f16->f32->f16
// is the identity (NaNs stay NaN).
TEST(Convert, AllHalves) {
  std::vector<uint16_t> h(65536), back_i(65536), back_s(65536);
  for (int i = 0; i < 65536; ++i) h[i] = uint16_t(i);
  std::vector<float> fi(65536), fs(65536);
  f16_to_f32(h.data(), fi.data(), 65536);
  scalar::f16_to_f32(h.data(), fs.data(), 65536);
  f32_to_f16(fi.data(), back_i.data(), 65536);
  scalar::f32_to_f16(fs.data(), back_s.data(), 65536);
  for (int i = 0; i < 65536; ++i) {
    const int e = (i >> 10) & 0x1f, m = i & 0x3ff;
    const double sign = (i & 0x8000) ? -1.0 : 1.0;
    if (e == 0x1f && m != 0) {
      EXPECT_TRUE(std::isnan(fi[i]) && std::isnan(fs[i])) << i;
      EXPECT_EQ(back_i[i] & 0x7c00, 0x7c00);
      EXPECT_NE(back_i[i] & 0x3ff, 0);
      continue;
    }
    const double ref = e == 0x1f ? sign * INFINITY
                       : e == 0  ? sign * std::ldexp(double(m), -24)
                                 : sign * std::ldexp(1.0 + m / 1024.0, e - 15);
    ASSERT_EQ(double(fi[i]), ref) << std::hex << i;
    ASSERT_EQ(0, std::memcmp(&fi[i], &fs[i], 4)) << std::hex << i;  // keeps the sign of zero
    ASSERT_EQ(back_i[i], h[i]) << std::hex << i;
    ASSERT_EQ(back_s[i], h[i]) << std::hex << i;
  }
}

// f32 -> f16 rounding: ISA == scalar bitwise on random bit patterns and halfway cases.
TEST(Convert, F32ToF16Rounding) {
  std::mt19937 rng(8);
  const int64_t n = 1 << 20;
  std::vector<float> x(n);
  for (int64_t i = 0; i < n; ++i) {
    uint32_t bits = rng();
    if (i % 4 == 1) bits = (bits & 0xffffe000u) | 0x1000u;      // exact halfway between halves
    if (i % 4 == 2) bits = (bits & 0x87ffffffu) | 0x30000000u;  // subnormal-half range
    std::memcpy(&x[i], &bits, 4);
  }
  std::vector<uint16_t> a(n), b(n);
  f32_to_f16(x.data(), a.data(), n);
  scalar::f32_to_f16(x.data(), b.data(), n);
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(x[i])) {
      EXPECT_TRUE((a[i] & 0x7c00) == 0x7c00 && (a[i] & 0x3ff));
      continue;
    }
    ASSERT_EQ(a[i], b[i]) << std::hex << "x bits " << *reinterpret_cast<uint32_t*>(&x[i]);
    // Round to nearest: no half is closer to x than the one chosen.
    const double got = f16_bits_to_f32(b[i]);
    if (std::isinf(got)) continue;
    for (int d : {-1, 1}) {
      const double nb = f16_bits_to_f32(uint16_t(b[i] + d));
      if (!std::isinf(nb) && !std::isnan(nb)) {
        ASSERT_LE(std::fabs(got - x[i]), std::fabs(nb - x[i])) << i;
      }
    }
  }
}

// quantize_row_q8_0: |x - d*q| <= d/2 from rounding, + |q| * |d - f16(d)| <= 127 * d * 2^-11
// from storing d as f16: 0.57 d in all.
TEST(Quantize, Q8RoundTrip) {
  std::mt19937 rng(9);
  for (int64_t cols : {32, 64, 96, 160, 352, 1024}) {
    auto x = random_floats(rng, cols, -5.0f, 5.0f);
    for (int i = 0; i < kQBlock; ++i) x[i] = 0.0f;  // an all-zero block: d = 0
    if (cols > 40) x[40] = 1e-3f;  // (the 32-float row has no x[40]: ASan found the write)
    std::vector<BlockQ8_0> q(cols / kQBlock), qs(cols / kQBlock);
    quantize_row_q8_0(x.data(), q.data(), cols);
    scalar::quantize_row_q8_0(x.data(), qs.data(), cols);
    std::vector<float> y(cols), ys(cols);
    dequantize_row(WType::Q8_0, q.data(), y.data(), cols);
    scalar::dequantize_row(WType::Q8_0, qs.data(), ys.data(), cols);
    for (int64_t b = 0; b < cols / kQBlock; ++b) {
      float amax = 0;
      for (int i = 0; i < kQBlock; ++i) amax = std::max(amax, std::fabs(x[b * kQBlock + i]));
      const double bound = 0.57 * amax / 127.0;
      for (int i = 0; i < kQBlock; ++i) {
        const int64_t k = b * kQBlock + i;
        EXPECT_LE(std::fabs(y[k] - x[k]), bound) << cols << " " << k;
        EXPECT_LE(std::fabs(ys[k] - x[k]), bound) << cols << " " << k;
      }
    }
  }
}

TEST(Quantize, DequantizeQ4) {
  BlockQ4_0 b{};
  b.d = f32_to_f16_bits(0.5f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  float y[32], ys[32];
  dequantize_row(WType::Q4_0, &b, y, 32);
  scalar::dequantize_row(WType::Q4_0, &b, ys, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8));
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j));
    EXPECT_EQ(ys[j], y[j]);
    EXPECT_EQ(ys[j + 16], y[j + 16]);
  }
}

TEST(Quantize, DequantizeQ4M) {
  BlockQ4_M b{};
  b.d = f32_to_f16_bits(0.5f);
  b.m = f32_to_f16_bits(-1.25f);
  for (int j = 0; j < 16; ++j) b.qs[j] = uint8_t(j | ((15 - j) << 4));
  float y[32], ys[32];
  dequantize_row(WType::Q4_M, &b, y, 32);
  scalar::dequantize_row(WType::Q4_M, &b, ys, 32);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], 0.5f * (j - 8) - 1.25f);
    EXPECT_EQ(y[j + 16], 0.5f * (7 - j) - 1.25f);
    EXPECT_EQ(ys[j], y[j]);
    EXPECT_EQ(ys[j + 16], y[j + 16]);
  }
}

// The table's dequantize_row (the embedding's row lookups) against the scalar build's, bit for
// bit, for every type this ISA's matmul takes (sse_table.h once read IQ4_NL and Q3_H as Q8_0).
TEST(Quantize, DequantizeRowEveryType) {
  std::mt19937 rng(21);
  for (int t = 0; t < kWTypes; ++t) {
    const WType w = WType(t);
    if (!takes(w)) continue;
    SCOPED_TRACE(test::type_name(w));
    const int64_t cols = 512;
    const auto row = test::random_weights(rng, w, 1, cols);
    std::vector<float> y(cols), ys(cols);
    dequantize_row(w, row.data(), y.data(), cols);
    scalar::dequantize_row(w, row.data(), ys.data(), cols);
    EXPECT_EQ(std::memcmp(y.data(), ys.data(), cols * sizeof(float)), 0);
    EXPECT_TRUE(std::any_of(y.begin(), y.end(), [](float v) { return v != 0; }));
  }
}

TEST(Cpu, GuardAndName) {
  EXPECT_EQ(missing_cpu_feature(), nullptr) << isa_name();  // the test host runs this build
  EXPECT_EQ(scalar::missing_cpu_feature(), nullptr);
  EXPECT_STREQ(scalar::isa_name(), "scalar");
  EXPECT_EQ(cpu_missing_for("scalar"), nullptr);
}

// The x86 levels nest: a CPU that runs one runs every level below it (avx512vnni and avxvnni
// are side by side above avx2).
TEST(Cpu, LevelsNest) {
#if defined(__x86_64__)
  const char* const below[][2] = {
      {"sse41", "sse2"}, {"avx2", "sse41"}, {"avxvnni", "avx2"}, {"avx512vnni", "avx2"}};
  for (const auto& [upper, lower] : below) {
    if (cpu_missing_for(upper) == nullptr) {
      EXPECT_EQ(cpu_missing_for(lower), nullptr) << upper;
    }
  }
  EXPECT_EQ(cpu_missing_for("sse2"), nullptr);  // every x86-64 CPU
  EXPECT_EQ(cpu_missing_for(isa_name()), missing_cpu_feature());
#endif
}

}  // namespace
}  // namespace krafla::kernels
