// The forward pass of every family (Llama 2/3, Mistral, Qwen2/3, SmolLM2/3, Gemma 2/3, Qwen3.5):
// embed → blocks (RMSNorm, GQA attention with RoPE — or a Gated DeltaNet layer on Qwen3.5 —
// then the MLP) → norm → logits, over a batch of tokens at consecutive positions of one
// sequence. The sequence's KV cache and DeltaNet state (SequenceState) are passed in: Forward
// holds only per-batch scratch, so one Forward can serve several sequences in turn.
#pragma once
#include <cstdint>
#include <memory>

#include "model/model_impl.h"
#include "ops/attention.h"
#include "ops/delta.h"
#include "ops/matmul.h"
#include "runtime/aligned.h"
#include "runtime/sequence.h"
#include "runtime/threadpool.h"

namespace krafla {

class Forward {
 public:
  // n_ctx bounds the positions (RoPE tables, attention scratch); n_batch the tokens of a run.
  Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch);
  Forward(const Forward&) = delete;  // the blocks hold a reference to mm_
  Forward& operator=(const Forward&) = delete;

  // Evaluates tokens[0..n) of `seq` at positions pos0..pos0+n-1 (n <= n_batch, pos0+n <= n_ctx
  // and seq's n_ctx). Writes the logits of every token ([n, n_vocab]) when all_logits, else of
  // the last one.
  void run(SequenceState& seq, const int32_t* tokens, int n, int pos0, bool all_logits,
           float* logits);

  int n_ctx() const { return n_ctx_; }
  void set_profile(Profile* p) { mm_.set_profile(p); }
  Profile* profile() const { return mm_.profile(); }
  void set_imatrix(Imatrix* m) { mm_.set_imatrix(m); }
  int n_batch() const { return n_batch_; }

 private:
  // The steps of run(), in the order of the model card. Rows are tokens of the batch.
  void embed(const int32_t* tokens, int n);                  // x_ = embedding rows (× embd_scale)
  void norm(const float* w, int n);                          // h_ = rmsnorm(x_) · w
  void mix(SequenceState& seq, int layer, int n, int pos0);  // tmp_ = attention or DeltaNet (h_)
  void mlp(const LayerWeights& L, int n);                    // tmp_ = down(act(gate(h_)) · up(h_))
  void residual(const float* post_norm, int n);        // x_ += rmsnorm(tmp_) · post_norm, or tmp_
  void output(int n, bool all_logits, float* logits);  // logits of the final norm of x_

  const Model::Impl& m_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  int n_ctx_, n_batch_;
  Matmuls mm_;
  AttentionBlock attention_;
  std::unique_ptr<delta::Block> delta_;  // with DeltaNet layers
  AlignedBuffer x_, h_, tmp_;  // (batch, dim): residual stream, normed input, block output
  AlignedBuffer gate_, up_;    // (batch, ffn_dim)
};

}  // namespace krafla
