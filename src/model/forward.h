// The forward pass of every family (Llama 2/3, Mistral, Qwen2/3, SmolLM2/3, Gemma 2/3, Qwen3.5,
// Qwen3-MoE, Qwen3.5-MoE):
// embed → blocks (RMSNorm, GQA attention with RoPE — or a Gated DeltaNet layer on Qwen3.5 —
// then the MLP or a Mixture-of-Experts block) → norm → logits, over a batch of tokens of one or
// several sequences. The sequences' KV caches and DeltaNet states (SequenceState) are passed in:
// Forward holds only per-batch scratch. Every step but the token mixing works row by row, and the
// matmul kernels give each row the same bits whatever the batch holds, so a sequence's logits do
// not depend on what else shares its batch.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/aligned.h"
#include "base/threadpool.h"
#include "model/model_impl.h"
#include "ops/attention.h"
#include "ops/delta.h"
#include "ops/matmul.h"
#include "ops/moe.h"
#include "state/sequence.h"

namespace krafla {

class Forward {
 public:
  // n_ctx bounds the positions (RoPE tables, attention scratch); n_batch the tokens of a run;
  // delta_chunk > 0 runs DeltaNet prefill in chunks (SessionOptions::delta_chunk).
  Forward(const Model::Impl& model, ThreadPool& pool, int n_ctx, int n_batch, int delta_chunk = 0);
  Forward(const Forward&) = delete;  // the blocks hold a reference to mm_
  Forward& operator=(const Forward&) = delete;

  // Evaluates tokens[0..n) of `seq` at positions pos0..pos0+n-1 (n <= n_batch, pos0+n <= n_ctx
  // and seq's n_ctx). Writes the logits of every token ([n, n_vocab]) when all_logits, else of
  // the last one.
  void run(SequenceState& seq, const int32_t* tokens, int n, int pos0, bool all_logits,
           float* logits);
  // Evaluates the rows of several sequences in one pass: tokens[r] is row r (segs give the
  // rows' sequences and positions; row0 of each is the rows before it; n in all <= n_batch).
  // logits receives, segment by segment, the rows each segment asks for ([rows, n_vocab]).
  void run(std::span<const SeqRows> segs, const int32_t* tokens, float* logits);

  int n_ctx() const { return n_ctx_; }
  void set_profile(Profile* p) { mm_.set_profile(p); }
  Profile* profile() const { return mm_.profile(); }
  void set_imatrix(Imatrix* m) { mm_.set_imatrix(m); }
  int n_batch() const { return n_batch_; }

 private:
  // The steps of run(), in the order of the model card. Rows are tokens of the batch.
  void embed(const int32_t* tokens, int n);           // x_ = embedding rows (× embd_scale)
  void norm(const float* w, int n);                   // h_ = rmsnorm(x_) · w
  void mix(const BatchLayout& b, int layer);          // tmp_ = attention or DeltaNet (h_)
  void mlp(const LayerWeights& L, int layer, int n);  // tmp_ = down(act(gate(h_)) · up(h_)),
                                                      // or the experts' sum on MoE layers
  void residual(const float* post_norm, int n);       // x_ += rmsnorm(tmp_) · post_norm, or tmp_
  void output(std::span<const SeqRows> segs, float* logits);  // logits of the final norm of x_

  const Model::Impl& m_;
  const ModelConfig& c_;
  ThreadPool& pool_;
  int n_ctx_, n_batch_;
  Matmuls mm_;
  AttentionBlock attention_;
  std::unique_ptr<delta::Block> delta_;         // with DeltaNet layers
  std::unique_ptr<moe::Block> moe_;             // with MoE layers
  std::vector<delta::Block::Rows> delta_rows_;  // this run's sequences, for delta_
  AlignedBuffer x_, h_, tmp_;  // (batch, dim): residual stream, normed input, block output
  AlignedBuffer gate_, up_;    // (batch, ffn_dim)
};

}  // namespace krafla
