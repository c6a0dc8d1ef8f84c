// Weight matrices as the kernels want them, and the batched matmul over them: one input
// quantized once per weight type, then several matrices multiplied in one parallel region.
#pragma once
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <span>
#include <string>

#include "base/aligned.h"
#include "base/threadpool.h"
#include "kernels/kernels.h"
#include "krafla/imatrix.h"
#include "krafla/profile.h"

namespace krafla {

// A weight matrix [rows, cols] (out × in), packed for this ISA's matmul. Where its bytes came
// from (a .mlb's rows, a GGUF file's) is the loader's business (model.cpp).
struct Matrix {
  kernels::WType type = kernels::WType::F32;
  int64_t rows = 0, cols = 0;
  AlignedBuffer packed;             // packed at load, or empty when cached:
  const uint8_t* cached = nullptr;  // the same bytes in the mapped pack cache
  std::string name;                 // the file's tensor name (blk.0.attn_q, ...): the imatrix's key
  const void* packed_data() const { return cached ? cached : packed.data(); }
};

// g = act(g) ⊙ up over n values: SwiGLU, or GeGLU with gelu.
inline void glu(bool gelu, float* g, const float* up, int64_t n) {
  if (gelu) {
    kernels::geglu(g, up, g, n);
  } else {
    kernels::swiglu(g, up, g, n);
  }
}

struct MatJob {
  const Matrix* m;
  float* out;  // (n, m->rows)
};

class Matmuls {
 public:
  // For inputs of up to n_batch rows of up to max_cols floats.
  Matmuls(ThreadPool& pool, int n_batch, int64_t max_cols);

  // out = in · mᵀ for every job: rows [0, n) of `in` (width cols) are quantized once for each
  // weight type the jobs need, then each job's rows are split across the threads in one
  // parallel region.
  // The time goes to `op` in profile() when one is set.
  void run(Op op, const float* in, int64_t cols, int n, std::span<const MatJob> jobs);
  void run(Op op, const float* in, int64_t cols, int n, std::initializer_list<MatJob> jobs) {
    run(op, in, cols, n, std::span<const MatJob>(jobs.begin(), jobs.size()));
  }
  // The same for jobs of equal row counts, followed by `after(r0, r1)` on each chunk of rows
  // once every job has computed it (for all n input rows): each thread walks its rows in chunks
  // small enough for the outputs to be still in cache when `after` reads them (the MLP's
  // activation, fused with its gate and up projections).
  using RowsFn = std::function<void(int64_t, int64_t)>;
  void run_then(Op op, const float* in, int64_t cols, int n, std::span<const MatJob> jobs,
                const RowsFn& after);
  void run_then(Op op, const float* in, int64_t cols, int n, std::initializer_list<MatJob> jobs,
                const RowsFn& after) {
    run_then(op, in, cols, n, std::span<const MatJob>(jobs.begin(), jobs.size()), after);
  }
  // The dense MLP on rows [0, n) of in (width gate.cols): out = down(act(gate·in) ⊙ up·in),
  // act SiLU (or GELU-tanh with gelu), fused into the gate/up pass as run_then does; g and u
  // are scratch of (n, gate.rows) floats. Its time goes to MatGateUp and MatDown.
  void mlp(const Matrix& gate, const Matrix& up, const Matrix& down, bool gelu, const float* in,
           int n, float* g, float* u, float* out);
  ThreadPool& pool() const { return pool_; }
  // The profile every block of the forward pass times its steps into (null: none).
  Profile* profile() const { return profile_; }
  void set_profile(Profile* p) { profile_ = p; }
  // When set, every run() adds its input rows to each job's matrix entry (ml_run --imatrix).
  Imatrix* imatrix() const { return imatrix_; }
  void set_imatrix(Imatrix* m) { imatrix_ = m; }

 private:
  void quantize(const float* in, int64_t cols, int n, std::span<const MatJob> jobs);
  void mul(const MatJob& j, int64_t r0, int64_t r1, int n);
  ThreadPool& pool_;
  Profile* profile_ = nullptr;
  Imatrix* imatrix_ = nullptr;
  AlignedBuffer
      act_[kernels::kWTypes];  // per weight type: (batch, act_row_size(type, max_cols)) bytes
};

}  // namespace krafla
