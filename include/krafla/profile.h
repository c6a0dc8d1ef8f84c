// Where the time of a run goes (ml_run --profile, ml_bench --profile): the wall time of each
// step of the forward pass and of sampling. A step is timed on the calling thread around its
// whole parallel region, so the steps add up to the time spent in Session::eval and in the
// sampler; threads waiting inside a step count as that step's time.
#pragma once
#include <array>
#include <cstdint>
#include <string>

namespace krafla {

enum class Op : int {
  Embed,        // embedding rows
  Norm,         // the layers' RMSNorms (and the final one)
  MatQkv,       // attention's q/k/v (and Qwen3.5 gate) projections
  Rope,         // biases, q/k norms, RoPE, storing k/v in the cache
  Attention,    // scores, softmax, weighted values (and Qwen3.5's output gate)
  MatO,         // attention's output projection
  MatDeltaIn,   // DeltaNet's input projections (qkv, z, beta, alpha)
  DeltaRule,    // DeltaNet's conv, gates, recurrence and gated norm
  MatDeltaOut,  // DeltaNet's output projection
  MatGateUp,    // the MLP's gate and up projections with its SwiGLU / GeGLU (fused)
  MatDown,      // the MLP's down projection
  MoeRoute,     // a Mixture-of-Experts layer's router, top-k, gathering and weighted sum
  Residual,     // residual adds (and Gemma's post-norms)
  MatOutput,    // the output (logits) projection
  Sampling,     // the sampler
  Count
};

struct Profile {
  std::array<double, size_t(Op::Count)> seconds{};
  std::array<int64_t, size_t(Op::Count)> calls{};

  void add(Op op, double s) { seconds[size_t(op)] += s, ++calls[size_t(op)]; }
  double total() const;
  static const char* name(Op op);
  // One row per op that ran (calls, ms, share of the total, µs per call), then the total and
  // its share of wall_seconds (the run's wall time as the caller measured it).
  std::string table(double wall_seconds) const;
};

double profile_clock();  // seconds, steady clock

// Times one op into *p; nothing when p is null. A scope that continues an op just timed
// (new_call false) adds its time without counting another call.
class ProfileScope {
 public:
  ProfileScope(Profile* p, Op op, bool new_call = true)
      : p_(p), op_(op), new_call_(new_call), t0_(p ? profile_clock() : 0.0) {}
  ~ProfileScope() {
    if (!p_) return;
    p_->seconds[size_t(op_)] += profile_clock() - t0_;
    p_->calls[size_t(op_)] += new_call_;
  }
  ProfileScope(const ProfileScope&) = delete;
  ProfileScope& operator=(const ProfileScope&) = delete;

 private:
  Profile* p_;
  Op op_;
  bool new_call_;
  double t0_;
};

}  // namespace krafla
