// Single-thread kernel micro-benchmarks at TinyLlama shapes (dim 2048, ffn 5632, vocab 32000),
// the gated delta rule step at Qwen3.5's, and one decode token's attention at depth.
// Decode (n_tok = 1) cycles through enough copies of the packed matrix to overflow the caches,
// so its GB/s is the weight stream a real forward sees; prefill (n_tok = 128) reuses one copy
// and reports GFLOP/s (2 * rows * cols * n_tok).
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "kernels/common.h"
#include "kernels/kernels.h"
#include "ops/attention.h"
#include "state/kv_cache.h"

namespace krafla::kernels {
namespace {

constexpr size_t kColdBytes = size_t(512) << 20;  // > any L3 this runs on

std::vector<uint8_t> stored_weights(WType t, int64_t rows, int64_t cols) {
  std::mt19937 rng(42);
  std::vector<uint8_t> w(row_bytes(t, cols) * rows);
  for (auto& b : w) b = uint8_t(rng());
  // Keep scales finite and small: every block starts with an f16 d.
  const size_t blk = row_bytes(t, kQBlock);
  if (t != WType::F32 && t != WType::F16) {
    for (size_t off = 0; off < w.size(); off += blk) {
      const uint16_t d = f32_to_f16_bits(0.01f);
      std::memcpy(&w[off], &d, 2);
      if (t == WType::Q4_M || t == WType::Q6_H || t == WType::Q5_M || t == WType::Q3_H)
        std::memcpy(&w[off + 2], &d, 2);  // m, d[1]
    }
  } else if (t == WType::F16) {
    for (size_t i = 0; i < w.size(); i += 2) w[i + 1] &= 0x3b;  // |value| < 1
  } else {
    auto* f = reinterpret_cast<float*>(w.data());
    for (size_t i = 0; i < w.size() / 4; ++i) f[i] = float(rng() % 2001) / 1000.0f - 1.0f;
  }
  return w;
}

void bm_matmul(benchmark::State& state, WType t) {
  if (!takes(t)) {
    state.SkipWithError("this ISA does not take the type");
    return;
  }
  const int64_t rows = state.range(0), cols = state.range(1), n_tok = state.range(2);
  const auto w = stored_weights(t, rows, cols);
  const size_t psize = packed_size(t, rows, cols);
  const size_t copies = n_tok == 1 ? std::max<size_t>(1, kColdBytes / psize) : 1;
  std::vector<uint8_t> packed(psize * copies);
  for (size_t c = 0; c < copies; ++c) pack(t, w.data(), rows, cols, 0, rows, &packed[c * psize]);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> x(cols * n_tok);
  for (auto& v : x) v = u(rng);
  const size_t ab = act_row_size(t, cols);
  std::vector<uint8_t> act(ab * n_tok);
  for (int64_t i = 0; i < n_tok; ++i) quantize_act(t, &x[i * cols], cols, &act[i * ab]);
  std::vector<float> out(rows * n_tok);
  size_t c = 0;
  for (auto _ : state) {
    matmul(t, &packed[c * psize], rows, cols, 0, rows, act.data(), n_tok, out.data(), rows);
    benchmark::ClobberMemory();
    c = (c + 1) % copies;
  }
  const double iters = double(state.iterations());
  state.counters["GB/s"] = benchmark::Counter(iters * double(psize), benchmark::Counter::kIsRate,
                                              benchmark::Counter::kIs1000);
  state.counters["GFLOP/s"] =
      benchmark::Counter(iters * 2.0 * double(rows) * double(cols) * double(n_tok) * 1e-9,
                         benchmark::Counter::kIsRate);
}

void bm_quantize_act(benchmark::State& state) {
  const int64_t cols = state.range(0);
  std::vector<float> x(cols, 0.5f);
  std::vector<uint8_t> act(act_row_size(WType::Q4_0, cols));
  for (auto _ : state) {
    quantize_act(WType::Q4_0, x.data(), cols, act.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(double(state.iterations()) * 4.0 * double(cols),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The gated delta rule step at Qwen3.5-0.8B's head shape (dk = dv = 128), cycling through the
// 18 linear layers x 16 value heads of state one decode token touches (18 MiB): the fused
// kernel against the same step composed of scale_f32/axpy_f32 (two full passes over the state,
// what src/ops/delta.cpp did before delta_step existed). GB/s counts the state read + written.
void composed_step(float* S, const float* q, const float* k, const float* v, float decay,
                   float beta, int64_t dk, int64_t dv, float* tmp, float* out) {
  std::memset(tmp, 0, sizeof(float) * dv);
  for (int64_t i = 0; i < dk; ++i) {
    scale_f32(S + i * dv, decay, dv);
    axpy_f32(k[i], S + i * dv, tmp, dv);
  }
  for (int64_t j = 0; j < dv; ++j) tmp[j] = beta * (v[j] - tmp[j]);
  std::memset(out, 0, sizeof(float) * dv);
  for (int64_t i = 0; i < dk; ++i) {
    axpy_f32(k[i], tmp, S + i * dv, dv);
    axpy_f32(q[i], S + i * dv, out, dv);
  }
}

void bm_delta_step(benchmark::State& state, bool fused) {
  constexpr int64_t dk = 128, dv = 128, heads = 18 * 16;
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.1f, 0.1f);
  std::vector<float> S(size_t(heads) * dk * dv), q(dk), k(dk), v(dv), tmp(dv), out(dv);
  for (auto* vec : {&S, &q, &k, &v})
    for (auto& x : *vec) x = u(rng);
  int64_t h = 0;
  for (auto _ : state) {
    float* s = &S[size_t(h) * dk * dv];
    if (fused)
      delta_step(s, q.data(), k.data(), v.data(), 0.99f, 0.5f, dk, dv, out.data());
    else
      composed_step(s, q.data(), k.data(), v.data(), 0.99f, 0.5f, dk, dv, tmp.data(), out.data());
    benchmark::ClobberMemory();
    h = (h + 1) % heads;
  }
  state.counters["GB/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * 4.0 * dk * dv,
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

// The F32 vector ops at TinyLlama's shapes (rows of 2048, the FFN's 5632, 32 heads of 64 for
// RoPE, an attention row of 1024 positions for softmax), in L1/L2: the ops' own cost, not a
// memory stream. GB/s counts the floats the op reads and writes.
enum class VecOp { Rmsnorm, Softmax, Swiglu, Geglu, Rope, Axpy, Scale, Add };

void bm_vec(benchmark::State& state, VecOp op) {
  const int64_t n = state.range(0);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::vector<float> a(n), b(n), out(n);
  for (auto* vec : {&a, &b})
    for (auto& x : *vec) x = u(rng);
  const std::vector<float> a0 = a;
  double floats = 0;
  for (auto _ : state) {
    switch (op) {
      case VecOp::Rmsnorm:
        rmsnorm(a.data(), b.data(), 1e-6f, out.data(), n), floats = 3.0 * n;
        break;
      case VecOp::Softmax:  // restore the input first so the values do not collapse
        std::memcpy(a.data(), a0.data(), sizeof(float) * n);
        softmax(a.data(), n), floats = 3.0 * n;
        break;
      case VecOp::Swiglu:
        swiglu(a.data(), b.data(), out.data(), n), floats = 3.0 * n;
        break;
      case VecOp::Geglu:
        geglu(a.data(), b.data(), out.data(), n), floats = 3.0 * n;
        break;
      case VecOp::Rope:  // n floats as heads of 64, cos/sin of 32
        rope(a.data(), n / 64, 64, 64, b.data(), b.data() + 32), floats = 2.0 * n;
        std::memcpy(a.data(), a0.data(), sizeof(float) * n);
        break;
      case VecOp::Axpy:
        axpy_f32(1e-3f, a.data(), out.data(), n), floats = 3.0 * n;
        break;
      case VecOp::Scale:
        scale_f32(out.data(), 0.999f, n), floats = 2.0 * n;
        break;
      case VecOp::Add:
        add_f32(a.data(), b.data(), out.data(), n), floats = 3.0 * n;
        break;
    }
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(double(state.iterations()) * 4.0 * floats, benchmark::Counter::kIsRate,
                         benchmark::Counter::kIs1000);
}

// One decode token's attention (attend_group) at depth n on the 1B shape's cache: 16 layers x 8
// KV heads of 64, 4 query heads each, F32 or F16, laid out in the cache's default chunks
// (layout 0), in chunks all the size of the default first one (1: about 2 MiB of K, runs of
// 16 KiB per head: the layout before the chunks grew) or in one chunk (2: each head's rows
// contiguous). GB/s counts the K and V bytes read.
void bm_attend(benchmark::State& state) {
  const int64_t n = state.range(0);
  const auto type = KvType(state.range(1));
  ModelConfig c;
  c.n_layers = 16, c.n_heads = 32, c.n_kv_heads = 8, c.head_dim = 64;
  c.layers.resize(16);
  const int64_t layout = state.range(2);
  const int64_t chunk = layout == 2   ? (n + 31) / 32 * 32
                        : layout == 1 ? KvCache(c, int(n), type).first_chunk_positions()
                                      : 0;
  KvCache kv(c, int(n), type, chunk);
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> k(64), v(64);
  for (int64_t p = 0; p < n; ++p)  // position by position, as a forward pass fills it
    for (int l = 0; l < 16; ++l)
      for (int h = 0; h < 8; ++h) {
        for (auto* x : {&k, &v})
          for (float& e : *x) e = u(rng);
        kv.store(l, h, p, k.data(), v.data());
      }
  std::vector<float> q(4 * 64), scores(4 * size_t(n)), rows(krafla::kKvRows * 64), out(4 * 64);
  for (float& x : q) x = u(rng);
  for (auto _ : state) {
    for (int l = 0; l < 16; ++l)
      for (int h = 0; h < 8; ++h)
        attend_group(q.data(), 4, kv.head(l, h), 0, n, 0.125f, 0.0f, scores.data(), rows.data(),
                     out.data());
    benchmark::ClobberMemory();
  }
  state.counters["GB/s"] =
      benchmark::Counter(double(state.iterations()) * 2.0 * 16 * 8 * double(n * kv.row_bytes()),
                         benchmark::Counter::kIsRate, benchmark::Counter::kIs1000);
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int64_t n_tok : {1, 128})
    for (auto [rows, cols] : {std::pair<int64_t, int64_t>{2048, 2048},
                              {5632, 2048},
                              {2048, 5632},
                              {32000, 2048},
                              {896, 896},
                              {4864, 896},
                              {896, 4864}})  // 1B-class, then 0.5B-class
      b->Args({rows, cols, n_tok});
  b->ArgNames({"rows", "cols", "n_tok"})->Unit(benchmark::kMicrosecond);
}

BENCHMARK_CAPTURE(bm_matmul, Q4_0, WType::Q4_0)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q4_M, WType::Q4_M)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q8_0, WType::Q8_0)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q6_H, WType::Q6_H)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q5_M, WType::Q5_M)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, IQ4_NL, WType::IQ4_NL)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, Q3_H, WType::Q3_H)->Apply(shapes);
BENCHMARK_CAPTURE(bm_matmul, F16, WType::F16)
    ->Args({2048, 2048, 1})
    ->Args({2048, 2048, 128})
    ->ArgNames({"rows", "cols", "n_tok"})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_quantize_act)->Arg(2048)->Arg(5632);
BENCHMARK_CAPTURE(bm_delta_step, fused, true)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(bm_delta_step, composed, false)->Unit(benchmark::kMicrosecond);
BENCHMARK(bm_attend)
    ->ArgsProduct({{2048, 8192}, {int64_t(KvType::F32), int64_t(KvType::F16)}, {0, 1, 2}})
    ->ArgNames({"depth", "kv", "layout"})
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(bm_vec, rmsnorm, VecOp::Rmsnorm)->Arg(2048)->Arg(2047);
BENCHMARK_CAPTURE(bm_vec, softmax, VecOp::Softmax)->Arg(1024)->Arg(1023);
BENCHMARK_CAPTURE(bm_vec, swiglu, VecOp::Swiglu)->Arg(5632)->Arg(5631);
BENCHMARK_CAPTURE(bm_vec, geglu, VecOp::Geglu)->Arg(5632);
BENCHMARK_CAPTURE(bm_vec, rope, VecOp::Rope)->Arg(2048);
BENCHMARK_CAPTURE(bm_vec, axpy, VecOp::Axpy)->Arg(2048);
BENCHMARK_CAPTURE(bm_vec, scale, VecOp::Scale)->Arg(2048);
BENCHMARK_CAPTURE(bm_vec, add, VecOp::Add)->Arg(2048);

}  // namespace
}  // namespace krafla::kernels
