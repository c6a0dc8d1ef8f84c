// Prints one line per (kernel, case) with a 64-bit hash of the built ISA's output bytes, for
// proving a refactoring of the kernels bit-identical: build it at two commits for the same ISA
// (tests/kernels/kernel_dump.sh) and diff the outputs. The inputs are deterministic on every
// platform (own generator, no <random> distributions) and include the awkward cases the
// kernel tests do not pin down bitwise: vector tails of every length, exp arguments far below
// the underflow threshold, infinities and NaNs, all -inf softmax rows.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/common.h"
#include "kernels/kernels.h"

#if !defined(KRAFLA_KERNEL_DUMP_MAIN)
#include <gtest/gtest.h>
#endif

namespace k = krafla::kernels;

namespace {

uint64_t g_state = 0x9e3779b97f4a7c15ull;
uint64_t next_u64() {  // splitmix64
  uint64_t z = (g_state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
float uniform(float lo, float hi) {
  return lo + (hi - lo) * float(next_u64() >> 40) * (1.0f / 16777216.0f);
}
std::vector<float> floats(int64_t n, float lo, float hi) {
  std::vector<float> v(size_t(n > 0 ? n : 1));
  for (int64_t i = 0; i < n; ++i) v[i] = uniform(lo, hi);
  return v;
}

uint64_t fnv(const void* p, size_t n, uint64_t h = 0xcbf29ce484222325ull) {
  const auto* b = static_cast<const uint8_t*>(p);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 0x100000001b3ull;
  return h;
}
FILE* g_out = stdout;
void emit(const char* name, long long a, long long b, const void* p, size_t n) {
  std::fprintf(g_out, "%s %lld %lld %016llx\n", name, a, b, (unsigned long long)fnv(p, n));
}

constexpr int64_t kLens[] = {1,  2,  3,  4,  5,  7,  8,  9,   15,  16,  17,  23,  31,
                             32, 33, 47, 48, 63, 64, 65, 100, 127, 128, 129, 255, 1023};
const float kInf = std::numeric_limits<float>::infinity();
const float kNan = std::numeric_limits<float>::quiet_NaN();

// Sprinkles specials into v (when it is long enough): the cases are numbered so every length
// gets a different mix.
void specials(std::vector<float>& v, int64_t n, int which) {
  const float s[] = {kInf, -kInf, kNan, -kNan, 0.0f, -0.0f, 1e-40f, -1e-40f, 200.0f, -200.0f};
  if (n < 3) return;
  for (int j = 0; j < 3; ++j) v[size_t((which * 7 + j * 5) % n)] = s[(which + j * 3) % 10];
}

// NaNs with distinct payloads (and signs) at the same places of every input: which operand's
// NaN comes out of a two-input instruction is part of the output bits.
void payload_nans(std::vector<float>& v, int64_t n, uint32_t tag) {
  for (int64_t i = 0; i < n; i += 5) {
    const uint32_t bits = (i % 2 ? 0xffc00000u : 0x7fc00000u) | (tag << 8) | uint32_t(i % 256);
    std::memcpy(&v[size_t(i)], &bits, 4);
  }
}

void vector_ops() {
  int which = 0;
  for (int64_t n : kLens) {
    for (int sp = 0; sp < 3; ++sp, ++which) {
      auto x = floats(n, -4.0f, 4.0f), w = floats(n, -2.0f, 2.0f), y = floats(n, -3.0f, 3.0f);
      auto g = floats(n, -20.0f, 20.0f), wide = floats(n, -120.0f, 30.0f);
      if (sp == 1) specials(x, n, which), specials(g, n, which + 1), specials(wide, n, which + 2);
      if (sp == 2) {
        payload_nans(x, n, 1), payload_nans(w, n, 2), payload_nans(y, n, 3);
        payload_nans(g, n, 4), payload_nans(wide, n, 5);
      }
      std::vector<float> out(static_cast<size_t>(n));
      k::rmsnorm(x.data(), w.data(), 1e-6f, out.data(), n);
      emit("rmsnorm", n, sp, out.data(), n * 4);
      out = x;
      k::rmsnorm(out.data(), w.data(), 1e-5f, out.data(), n);  // aliased
      emit("rmsnorm_alias", n, sp, out.data(), n * 4);
      const float d = k::dot_f32(x.data(), w.data(), n);
      emit("dot_f32", n, sp, &d, 4);
      out = y;
      k::axpy_f32(0.37f, x.data(), out.data(), n);
      emit("axpy_f32", n, sp, out.data(), n * 4);
      out = x;
      k::scale_f32(out.data(), -1.7f, n);
      emit("scale_f32", n, sp, out.data(), n * 4);
      k::add_f32(x.data(), y.data(), out.data(), n);
      emit("add_f32", n, sp, out.data(), n * 4);
      k::swiglu(g.data(), y.data(), out.data(), n);
      emit("swiglu", n, sp, out.data(), n * 4);
      k::geglu(g.data(), y.data(), out.data(), n);
      emit("geglu", n, sp, out.data(), n * 4);
      k::swiglu(wide.data(), y.data(), out.data(), n);
      emit("swiglu_wide", n, sp, out.data(), n * 4);
      k::geglu(wide.data(), y.data(), out.data(), n);
      emit("geglu_wide", n, sp, out.data(), n * 4);
      for (const auto* src : {&x, &g, &wide}) {
        out = *src;
        const float s = k::softmax(out.data(), n);
        emit("softmax", n, sp, out.data(), n * 4);
        emit("softmax_sum", n, sp, &s, 4);
      }
    }
    // Degenerate softmax rows: all -inf, one finite among -inf, a NaN.
    std::vector<float> v(size_t(n), -kInf);
    float s = k::softmax(v.data(), n);
    emit("softmax_allinf", n, 0, v.data(), n * 4);
    emit("softmax_allinf_sum", n, 0, &s, 4);
    v.assign(size_t(n), -kInf);
    v[size_t(n / 2)] = 3.0f;
    s = k::softmax(v.data(), n);
    emit("softmax_onefinite", n, 0, v.data(), n * 4);
    v = floats(n, -5.0f, 5.0f);
    v[size_t(n - 1)] = kNan;
    s = k::softmax(v.data(), n);
    emit("softmax_nan", n, 0, v.data(), n * 4);
    emit("softmax_nan_sum", n, 0, &s, 4);
  }
  float one = 1.0f;
  k::softmax(&one, 0);
  emit("softmax_n0", 0, 0, &one, 4);
}

void rope_ops() {
  const int64_t shapes[][2] = {{64, 64}, {64, 32}, {128, 128}, {128, 64}, {80, 80}, {96, 24},
                               {16, 6},  {8, 2},   {256, 256}, {34, 34},  {66, 50}};
  for (const auto& sh : shapes) {
    const int64_t hd = sh[0], rot = sh[1], nh = 3;
    auto x = floats(nh * hd, -3.0f, 3.0f);
    auto ang = floats(rot / 2, -6.0f, 6.0f);
    std::vector<float> c(size_t(rot / 2 + 1)), s(size_t(rot / 2 + 1));
    for (int64_t i = 0; i < rot / 2; ++i) c[i] = std::cos(ang[i]), s[i] = std::sin(ang[i]);
    auto xn = x;
    k::rope(x.data(), nh, hd, rot, c.data(), s.data());
    emit("rope", hd, rot, x.data(), x.size() * 4);
    payload_nans(xn, int64_t(xn.size()), 6), payload_nans(c, rot / 2, 7);
    payload_nans(s, rot / 2, 8);
    k::rope(xn.data(), nh, hd, rot, c.data(), s.data());
    emit("rope_nan", hd, rot, xn.data(), xn.size() * 4);
  }
}

void conversions() {
  std::vector<uint16_t> h(65536);
  for (int i = 0; i < 65536; ++i) h[size_t(i)] = uint16_t(i);
  std::vector<float> f(65536);
  k::f16_to_f32(h.data(), f.data(), 65536);
  emit("f16_to_f32_all", 65536, 0, f.data(), f.size() * 4);
  for (int64_t n : kLens) {
    k::f16_to_f32(h.data() + 1000, f.data(), n);
    emit("f16_to_f32", n, 0, f.data(), n * 4);
  }
  auto x = floats(4096, -70000.0f, 70000.0f);
  for (int i = 0; i < 4096; i += 3) x[size_t(i)] *= std::ldexp(1.0f, -int(i % 40));
  x[0] = kInf, x[1] = -kInf, x[2] = kNan, x[3] = 65520.0f, x[4] = 65519.0f, x[5] = 5.96e-8f;
  x[6] = 2.98e-8f, x[7] = -0.0f, x[8] = 1e-45f;
  std::vector<uint16_t> o(4096);
  k::f32_to_f16(x.data(), o.data(), 4096);
  emit("f32_to_f16", 4096, 0, o.data(), o.size() * 2);
  for (int64_t n : kLens) {
    k::f32_to_f16(x.data() + 7, o.data(), n);
    emit("f32_to_f16", n, 1, o.data(), n * 2);
  }
  auto q = floats(1024, -3.0f, 3.0f);
  std::vector<k::BlockQ8_0> blk(32);
  k::quantize_row_q8_0(q.data(), blk.data(), 1024);
  emit("quantize_row_q8_0", 1024, 0, blk.data(), blk.size() * sizeof(k::BlockQ8_0));
}

std::vector<uint8_t> weights(k::WType t, int64_t rows, int64_t cols) {
  std::vector<uint8_t> w(k::row_bytes(t, cols) * size_t(rows));
  uint8_t* p = w.data();
  for (int64_t r = 0; r < rows; ++r) {
    if (t == k::WType::F32 || t == k::WType::F16) {
      const bool f32 = t == k::WType::F32;
      for (int64_t c = 0; c < cols; ++c, p += f32 ? 4 : 2) {
        const float v = uniform(-1.0f, 1.0f);
        const uint16_t h = k::f32_to_f16_bits(v);
        std::memcpy(p, f32 ? static_cast<const void*>(&v) : &h, f32 ? 4 : 2);
      }
      continue;
    }
    const size_t blk = k::row_bytes(t, k::kQBlock);
    const int head = k::quants_offset(t);  // f16 d [and m], then the quants
    for (int64_t b = 0; b < cols / k::kQBlock; ++b, p += blk) {
      const uint16_t d = k::f32_to_f16_bits(uniform(0.001f, 0.02f));
      std::memcpy(p, &d, 2);
      if (head == 4) {
        const uint16_t m = k::f32_to_f16_bits(uniform(-0.1f, 0.1f));
        std::memcpy(p + 2, &m, 2);
      }
      for (size_t j = head; j < blk; ++j) p[j] = uint8_t(next_u64());
    }
  }
  return w;
}

void matmuls(bool int8) {
  const k::WType types[] = {k::WType::F32,  k::WType::F16,    k::WType::Q8_0,
                            k::WType::Q4_0, k::WType::Q4_M,   k::WType::Q6_H,
                            k::WType::Q5_M, k::WType::IQ4_NL, k::WType::Q3_H};
  const int64_t shapes[][2] = {{1, 32}, {5, 64}, {16, 96}, {37, 256}, {70, 128}, {130, 64}};
  for (k::WType t : types) {
    if (!int8 && t != k::WType::F32 && t != k::WType::F16) continue;
    if (!k::takes(t)) continue;
    for (const auto& sh : shapes) {
      const int64_t rows = sh[0], cols = sh[1];
      const auto w = weights(t, rows, cols);
      std::vector<uint8_t> packed(k::packed_size(t, rows, cols));
      k::pack(t, w.data(), rows, cols, 0, rows, packed.data());
      std::vector<float> dq(static_cast<size_t>(cols));
      k::dequantize_row(t, w.data() + k::row_bytes(t, cols) * size_t(rows - 1), dq.data(), cols);
      emit("dequantize_row", int(t), cols, dq.data(), dq.size() * 4);
      for (int64_t n_tok : {1, 2, 3, 4, 5, 7}) {
        auto x = floats(n_tok * cols, -2.0f, 2.0f);
        const size_t ab = k::act_row_size(t, cols);
        std::vector<uint8_t> act(ab * size_t(n_tok));
        for (int64_t i = 0; i < n_tok; ++i)
          k::quantize_act(t, x.data() + i * cols, cols, act.data() + ab * size_t(i));
        emit("quantize_act", int(t) * 1000 + cols, n_tok, act.data(), act.size());
        const int64_t ld = rows + 3;
        std::vector<float> out(size_t(ld * n_tok), 0.0f);
        k::matmul(t, packed.data(), rows, cols, 0, rows, act.data(), n_tok, out.data(), ld);
        emit("matmul", int(t) * 1000 + rows, cols * 100 + n_tok, out.data(), out.size() * 4);
      }
    }
  }
}

void delta_steps() {
  g_state = 0x243f6a8885a308d3ull;  // inputs independent of the types the build takes above
  const int64_t shapes[][2] = {{16, 7}, {16, 33}, {64, 64}, {32, 128}, {128, 128}, {8, 100}};
  for (const auto& sh : shapes) {
    const int64_t dk = sh[0], dv = sh[1];
    auto S = floats(dk * dv, -1.0f, 1.0f);
    const auto q = floats(dk, -1.0f, 1.0f), kk = floats(dk, -1.0f, 1.0f);
    const auto v = floats(dv, -1.0f, 1.0f);
    std::vector<float> out(static_cast<size_t>(dv));
    for (int step = 0; step < 3; ++step)
      k::delta_step(S.data(), q.data(), kk.data(), v.data(), 0.93f, 0.41f, dk, dv, out.data());
    emit("delta_step_S", dk, dv, S.data(), S.size() * 4);
    emit("delta_step_out", dk, dv, out.data(), out.size() * 4);
  }
}

void dump_all(bool int8) {
  g_state = 0x9e3779b97f4a7c15ull;
  std::fprintf(g_out, "isa %s row_tile %d\n", k::isa_name(), k::row_tile());
  vector_ops();
  rope_ops();
  conversions();
  matmuls(int8);
  delta_steps();
}

}  // namespace

#if defined(KRAFLA_KERNEL_DUMP_MAIN)
// Standalone (tests/kernels/kernel_dump.sh), printing to stdout. --no-int8-matmul skips the
// quantized matmuls: for running an avxvnni build under a qemu that lacks AVX-VNNI (everything
// else of that table is plain AVX2).
int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  dump_all(!(argc > 1 && std::strcmp(argv[1], "--no-int8-matmul") == 0));
  return 0;
}
#else
// In kernel_tests: KRAFLA_KERNEL_DUMP=FILE writes the dump there; skipped otherwise.
TEST(KernelDump, ToFile) {
  const char* path = std::getenv("KRAFLA_KERNEL_DUMP");
  if (path == nullptr) GTEST_SKIP() << "set KRAFLA_KERNEL_DUMP=FILE to write the dump";
  g_out = std::fopen(path, "w");
  ASSERT_NE(g_out, nullptr) << path;
  dump_all(true);
  std::fclose(g_out);
  g_out = stdout;
}
#endif
