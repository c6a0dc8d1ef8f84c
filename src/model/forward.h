// The forward pass of every family (Llama 2/3, Mistral, Qwen2/3, SmolLM2/3, Gemma 2/3, Qwen3.5):
// embed → blocks (RMSNorm, GQA attention with RoPE — or a Gated DeltaNet layer on Qwen3.5 —
// then the MLP) → norm → logits, over a batch of tokens at consecutive positions of one
// sequence, whose KV cache and DeltaNet state (SequenceState) are passed in: Forward itself
// holds only per-batch scratch.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "model/model_impl.h"
#include "ops/delta.h"
#include "ops/matmul.h"
#include "runtime/aligned.h"
#include "runtime/sequence.h"
#include "runtime/threadpool.h"

namespace krafla {

class Forward {
 public:
  // n_ctx bounds the positions (RoPE tables); n_batch the tokens of one run.
  Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch);

  // Evaluates tokens[0..n) of `seq` at positions pos0..pos0+n-1 (n <= n_batch, pos0+n <= n_ctx
  // and seq's n_ctx). Writes the logits of every token ([n, n_vocab]) when all_logits, else of
  // the last one.
  void run(SequenceState& seq, const int32_t* tokens, int n, int pos0, bool all_logits,
           float* logits);

  int n_ctx() const { return n_ctx_; }
  int n_batch() const { return n_batch_; }

 private:
  void attention(KvCache& kv, int layer, int n, int pos0);
  void attention_block(KvCache& kv, int layer, int n, int pos0);  // h → tmp_

  const Model::Impl& m_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  int n_ctx_, n_batch_;
  Matmuls mm_;
  std::unique_ptr<delta::Block> delta_;  // with DeltaNet layers
  AlignedBuffer agate_;               // (batch, q_dim) attention output gate (Qwen3.5)
  AlignedBuffer rope_cos_, rope_sin_;  // (ctx, rope_dim/2)
  AlignedBuffer rope_cos_local_, rope_sin_local_;  // (ctx, rope_dim/2), Gemma 3 local layers
  AlignedBuffer x_, h_;         // (batch, dim)
  AlignedBuffer q_, k_, v_;     // (batch, q_dim | kv_dim)
  AlignedBuffer att_, tmp_;     // (batch, q_dim), (batch, dim)
  AlignedBuffer gate_, up_;     // (batch, ffn_dim)
  AlignedBuffer scores_;        // (threads, ctx)
};

}  // namespace krafla
