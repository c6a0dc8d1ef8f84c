// The forward pass of the Llama family (Llama 2/3, TinyLlama, Mistral, SmolLM2): embed →
// blocks (RMSNorm, GQA attention with RoPE, SwiGLU MLP) → norm → logits, over a batch of
// tokens at consecutive positions, with an F32 KV cache.
#pragma once
#include <cstdint>
#include <vector>

#include "model/model_impl.h"
#include "runtime/aligned.h"
#include "runtime/threadpool.h"

namespace krafla {

class Forward {
 public:
  Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch);

  // Evaluates tokens[0..n) at positions pos0..pos0+n-1 (n <= n_batch, pos0+n <= n_ctx).
  // Writes the logits of every token ([n, n_vocab]) when all_logits, else of the last one.
  void run(const int32_t* tokens, int n, int pos0, bool all_logits, float* logits);

  int n_ctx() const { return n_ctx_; }
  int n_batch() const { return n_batch_; }

 private:
  struct MatJob {
    const Matrix* m;
    float* out;  // [n, m->rows]
  };
  // Quantizes rows [0,n) of `in` (width cols) for each weight type the jobs need, then runs
  // all jobs in one parallel region.
  void matmuls(const float* in, int64_t cols, int n, std::initializer_list<MatJob> jobs);
  void attention(int layer, int n, int pos0);
  float* k_cache(int layer, int kvh) const;
  float* v_cache(int layer, int kvh) const;

  const Model::Impl& m_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  int n_ctx_, n_batch_;
  AlignedBuffer kv_k_, kv_v_;   // (layer, kv_head, ctx, head_dim)
  AlignedBuffer rope_cos_, rope_sin_;  // (ctx, head_dim/2)
  AlignedBuffer rope_cos_local_, rope_sin_local_;  // (ctx, head_dim/2), Gemma 3 local layers
  AlignedBuffer x_, h_;         // (batch, dim)
  AlignedBuffer q_, k_, v_;     // (batch, q_dim | kv_dim)
  AlignedBuffer att_, tmp_;     // (batch, q_dim), (batch, dim)
  AlignedBuffer gate_, up_;     // (batch, ffn_dim)
  AlignedBuffer act_[4];        // quantized activations per weight type
  AlignedBuffer scores_;        // (threads, ctx)
};

}  // namespace krafla
