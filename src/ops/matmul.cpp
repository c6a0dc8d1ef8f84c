#include "ops/matmul.h"

#include <fmt/format.h>

#include <algorithm>

#include "krafla/error.h"

namespace krafla {

namespace K = kernels;
using K::WType;

Matmuls::Matmuls(ThreadPool& pool, int n_batch, int64_t max_cols) : pool_(pool) {
  for (int t = 0; t < K::kWTypes; ++t)
    act_[t].resize(size_t(n_batch) * K::act_row_size(WType(t), max_cols));
}

// Adds the input to the imatrix and quantizes it once for each weight type the jobs need.
void Matmuls::quantize(const float* in, int64_t cols, int n, std::span<const MatJob> jobs) {
  if (imatrix_)
    for (const auto& j : jobs) imatrix_->add(j.m->name, in, cols, n);
  bool need[K::kWTypes] = {};
  for (const auto& j : jobs) need[int(j.m->type)] = true;
  pool_.for_each(n, [&](int64_t tok) {
    for (int t = 0; t < K::kWTypes; ++t)
      if (need[t])
        K::quantize_act(WType(t), in + tok * cols, cols,
                        act_[t].data() + tok * K::act_row_size(WType(t), cols));
  });
}

void Matmuls::mul(const MatJob& j, int64_t r0, int64_t r1, int n) {
  if (r0 < r1)
    K::matmul(j.m->type, j.m->packed_data(), j.m->rows, j.m->cols, r0, r1,
              act_[int(j.m->type)].data(), n, j.out, j.m->rows);
}

void Matmuls::run(Op op, const float* in, int64_t cols, int n, std::span<const MatJob> jobs) {
  const ProfileScope scope(profile_, op);
  quantize(in, cols, n, jobs);
  // Not pool_.split: every job's rows are split separately, all in one region.
  const int64_t tile = K::row_tile();
  const int nt = pool_.size();
  pool_.run([&](int ti) {
    for (const auto& j : jobs) {
      auto [r0, r1] = split_range(j.m->rows, ti, nt, tile);
      mul(j, r0, r1, n);
    }
  });
}

void Matmuls::run_then(Op op, const float* in, int64_t cols, int n, std::span<const MatJob> jobs,
                       const RowsFn& after) {
  const ProfileScope scope(profile_, op);
  const int64_t rows = jobs.empty() ? 0 : jobs[0].m->rows;
  for (const auto& j : jobs)
    if (j.m->rows != rows)
      throw Error(fmt::format("internal: run_then over {} ({} rows) and {} ({} rows)",
                              jobs[0].m->name, rows, j.m->name, j.m->rows));
  quantize(in, cols, n, jobs);
  // Chunks of 32k outputs per job (128 KiB, read back from L2 by `after`): 256 rows for a
  // 128-token batch; one token's whole share in one chunk, so that each matrix streams
  // straight through (every switch between the jobs restarts their weight streams cold).
  const int64_t tile = K::row_tile();
  const int64_t chunk = std::max<int64_t>(tile, 32768 / std::max(n, 1) / tile * tile);
  const int nt = pool_.size();
  pool_.run([&](int ti) {
    const auto [r0, r1] = split_range(rows, ti, nt, tile);
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
      const int64_t c1 = std::min(r1, c0 + chunk);
      for (const auto& j : jobs) mul(j, c0, c1, n);
      after(c0, c1);
    }
  });
}

void Matmuls::mlp(const Matrix& gate, const Matrix& up, const Matrix& down, bool gelu,
                  const float* in, int n, float* g, float* u, float* out) {
  const int64_t ffn = gate.rows;
  run_then(Op::MatGateUp, in, gate.cols, n, {{&gate, g}, {&up, u}}, [&](int64_t r0, int64_t r1) {
    for (int t = 0; t < n; ++t) glu(gelu, g + t * ffn + r0, u + t * ffn + r0, r1 - r0);
  });
  run(Op::MatDown, g, ffn, n, {{&down, out}});
}

}  // namespace krafla
