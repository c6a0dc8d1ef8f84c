// The rival's numbers for kernel_bench's shapes: one ggml mul_mat on ggml's CPU backend, single
// thread, weights optionally in the CPU_REPACK buffer (what llama.cpp uses for Q4_0 on AVX2+
// CPUs: q4_0_8x8 tiles). Best-of thread CPU time; n_tok = 1 cycles through copies of the weights
// that together overflow the caches, like kernel_bench. Includes ggml's activation quantization.
// Built only with -DKRAFLA_GGML_DIR=<ggml source tree built into <dir>/build>.
// Usage: ggml_mm TYPE rows cols n_tok repack(0|1), TYPE q4 (Q4_0), q8 (Q8_0) or any ggml type
// name (q4_K, q6_K, iq4_xs, ...).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <random>
#include <vector>

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"

namespace {

double cpu_now() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

ggml_backend_buffer_type_t repack_buft() {
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  auto get_extra =
      reinterpret_cast<ggml_backend_dev_get_extra_bufts_t>(ggml_backend_reg_get_proc_address(
          ggml_backend_dev_backend_reg(dev), "ggml_backend_dev_get_extra_bufts"));
  for (auto p = get_extra ? get_extra(dev) : nullptr; p && *p; ++p)
    if (std::strcmp(ggml_backend_buft_name(*p), "CPU_REPACK") == 0) return *p;
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6) {
    std::fprintf(stderr, "usage: ggml_mm q4|q8|TYPE rows cols n_tok repack(0|1)\n");
    return 2;
  }
  ggml_type type = std::strcmp(argv[1], "q8") == 0 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0;
  if (std::strcmp(argv[1], "q8") != 0 && std::strcmp(argv[1], "q4") != 0) {
    type = GGML_TYPE_COUNT;
    for (int i = 0; i < GGML_TYPE_COUNT; ++i)
      if (const char* n = ggml_type_name(ggml_type(i)); n && std::strcmp(n, argv[1]) == 0)
        type = ggml_type(i);
    if (type == GGML_TYPE_COUNT) {
      std::fprintf(stderr, "ggml_mm: no ggml type named '%s'\n", argv[1]);
      return 2;
    }
  }
  const int64_t rows = std::atoll(argv[2]), cols = std::atoll(argv[3]), n_tok = std::atoll(argv[4]);
  const bool repack = std::atoi(argv[5]) != 0;
  ggml_log_set([](ggml_log_level, const char*, void*) {}, nullptr);  // repack logs per tensor

  ggml_backend_t be = ggml_backend_cpu_init();
  ggml_backend_cpu_set_n_threads(be, 1);
  ggml_backend_buffer_type_t wbuft = repack ? repack_buft() : ggml_backend_cpu_buffer_type();
  if (!wbuft) {
    std::fprintf(stderr, "no CPU_REPACK buffer type\n");
    return 2;
  }
  const size_t wbytes = ggml_row_size(type, cols) * rows;
  const int copies = n_tok == 1 ? std::max<int>(1, int((size_t(512) << 20) / wbytes)) : 1;
  const ggml_init_params ip{
      ggml_tensor_overhead() * (copies * 4 + 16) + ggml_graph_overhead() * (copies + 1), nullptr,
      true};
  ggml_context* cw = ggml_init(ip);
  ggml_context* ca = ggml_init(ip);
  std::vector<ggml_tensor*> w(copies);
  std::vector<ggml_cgraph*> g(copies);
  for (auto& t : w) t = ggml_new_tensor_2d(cw, type, cols, rows);
  ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors_from_buft(cw, wbuft);

  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> f(size_t(rows * cols));
  for (auto& v : f) v = u(rng);
  std::vector<uint8_t> q(wbytes);
  ggml_quantize_chunk(type, f.data(), q.data(), 0, rows, cols, nullptr);
  for (auto* t : w) ggml_backend_tensor_set(t, q.data(), 0, wbytes);

  ggml_tensor* x = ggml_new_tensor_2d(ca, GGML_TYPE_F32, cols, n_tok);
  for (int c = 0; c < copies; ++c) {
    g[c] = ggml_new_graph(ca);
    ggml_build_forward_expand(g[c], ggml_mul_mat(ca, w[c], x));
  }
  ggml_backend_buffer_t ba = ggml_backend_alloc_ctx_tensors(ca, be);
  std::vector<float> xv(size_t(cols * n_tok));
  for (auto& v : xv) v = u(rng);
  ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * 4);

  double best = 1e9;
  for (int it = 0, c = 0; it < (n_tok == 1 ? 60 : 8); ++it, c = (c + 1) % copies) {
    const double t0 = cpu_now();
    ggml_backend_graph_compute(be, g[c]);
    best = std::min(best, cpu_now() - t0);
  }
  std::printf("ggml%s %s %lldx%lld n_tok=%lld: %.3f ms  %.1f GB/s  %.1f GFLOP/s\n",
              repack ? "+repack" : "", argv[1], (long long)rows, (long long)cols, (long long)n_tok,
              best * 1e3, double(wbytes) / best * 1e-9,
              2.0 * double(rows * cols * n_tok) / best * 1e-9);
  ggml_backend_buffer_free(ba);
  ggml_backend_buffer_free(bw);
  ggml_free(ca);
  ggml_free(cw);
  ggml_backend_free(be);
  return 0;
}
