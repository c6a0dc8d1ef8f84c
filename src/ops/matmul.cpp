#include "ops/matmul.h"

namespace krafla {

namespace K = kernels;
using K::WType;

Matmuls::Matmuls(ThreadPool& pool, int n_batch, int64_t max_cols) : pool_(pool) {
  for (int t = 0; t < 4; ++t) act_[t].resize(size_t(n_batch) * K::act_row_size(WType(t), max_cols));
}

void Matmuls::run(Op op, const float* in, int64_t cols, int n, std::span<const MatJob> jobs) {
  const ProfileScope scope(profile_, op);
  if (imatrix_)
    for (const auto& j : jobs) imatrix_->add(j.m->name, in, cols, n);
  bool need[4] = {false, false, false, false};
  for (const auto& j : jobs) need[int(j.m->type)] = true;
  pool_.for_each(n, [&](int64_t tok) {
    for (int t = 0; t < 4; ++t)
      if (need[t])
        K::quantize_act(WType(t), in + tok * cols, cols,
                        act_[t].data() + tok * K::act_row_size(WType(t), cols));
  });
  // Not pool_.split: every job's rows are split separately, all in one region.
  const int64_t tile = K::row_tile();
  const int nt = pool_.size();
  pool_.run([&](int ti) {
    for (const auto& j : jobs) {
      auto [r0, r1] = split_range(j.m->rows, ti, nt, tile);
      if (r0 < r1)
        K::matmul(j.m->type, j.m->packed_data(), j.m->rows, j.m->cols, r0, r1,
                  act_[int(j.m->type)].data(), n, j.out, j.m->rows);
    }
  });
}

}  // namespace krafla
