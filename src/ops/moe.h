// The Mixture-of-Experts MLP (transformers' Qwen3MoeSparseMoeBlock and
// Qwen3_5MoeSparseMoeBlock; docs/format.md "Mixture of Experts"): a router picks each token's k
// experts of E, and the token's output is the weighted sum of those experts' SwiGLU MLPs (plus
// a gated shared expert on Qwen3.5-MoE).
//
// A batch is grouped by expert: the rows routed to an expert are gathered, each active expert
// runs one matmul over just its rows (so a prefill step reads each expert's weights once, and
// a decode step reads only the chosen experts'), and the results are summed back per token in
// ascending expert order. Every row gets the same bits whatever else is in the batch and
// however many threads run: the matmul kernels compute each row alone, and a token's sum does
// not depend on the other tokens.
#pragma once
#include <cstdint>
#include <vector>

#include "base/aligned.h"
#include "krafla/model.h"
#include "ops/matmul.h"

namespace krafla::moe {

struct Weights {
  Matrix router;                  // (E, dim), F32
  std::vector<Matrix> gate, up;   // E × (expert_ffn_dim, dim)
  std::vector<Matrix> down;       // E × (dim, expert_ffn_dim)
  Matrix shared_router;           // (1, dim), F32: the shared expert's gate; empty without one
  Matrix shared_gate, shared_up;  // (shared_expert_ffn_dim, dim)
  Matrix shared_down;             // (dim, shared_expert_ffn_dim)
};

// The routing of one token: its k experts in ascending index order and their weights.
// `logits` are the router's E outputs (replaced by their softmax). Softmax in float32 over
// all E, the k largest probabilities (the lower index first among equal ones, as torch.topk),
// renormalised when `norm`. Exposed for the tests.
void route(float* logits, int n_experts, int k, bool norm, int32_t* experts, float* weights);

class Block {
 public:
  // For batches of up to n_batch rows.
  Block(const ModelConfig& c, int n_batch, Matmuls& mm);

  // out = MoE(x) for rows [0, n) of x (n, dim).
  void run(const Weights& w, const float* x, int n, float* out);

 private:
  void group(int n);  // routes every row and groups the slots by expert
  // gate/up, activation and down of the active experts, over their slots (y_)
  void experts(const Weights& w, const float* x, int n);
  void shared(const Weights& w, const float* x, int n);

  const ModelConfig& c_;
  Matmuls& mm_;
  ThreadPool& pool_;
  int n_batch_;
  AlignedBuffer logits_;             // (batch, E [+ 1 for the shared expert's gate])
  std::vector<int32_t> row_expert_;  // (batch, k): each row's experts, ascending
  std::vector<float> row_weight_;    // (batch, k)
  std::vector<int32_t> start_;       // (E + 1): expert e's slots are [start_[e], start_[e+1])
  std::vector<int32_t> slot_row_;    // (batch · k): the row of each slot, grouped by expert
  std::vector<int32_t> row_slot_;    // (batch, k): the slot of each row's j-th expert
  std::vector<int32_t> next_;        // (E): group()'s next free slot per expert
  AlignedBuffer act_gate_, act_up_, act_down_;  // the slots' quantized inputs per matmul type
  AlignedBuffer act_tok_;                       // each token's row quantized once
  AlignedBuffer g_, u_;                         // (batch · k, expert_ffn_dim)
  AlignedBuffer y_;                             // (batch · k, dim)
  AlignedBuffer sg_, su_, sy_;                  // shared expert: (batch, Is), (batch, dim)
};

}  // namespace krafla::moe
