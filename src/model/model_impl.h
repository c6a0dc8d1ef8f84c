// The private side of krafla::Model: weights as the forward pass sees them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "io/mlb_file.h"
#include "io/pack_cache.h"
#include "kernels/kernels.h"
#include "krafla/model.h"
#include "model/config.h"
#include "runtime/aligned.h"

namespace krafla {

// A weight matrix [rows, cols] (out × in): packed for this ISA's matmul, plus the stored
// (ggml-layout) bytes in the mapping for row lookups (embeddings).
struct Matrix {
  kernels::WType type = kernels::WType::F32;
  int64_t rows = 0, cols = 0;
  AlignedBuffer packed;                   // packed at load, or empty when cached:
  const uint8_t* cached = nullptr;        // the same bytes in the mapped pack cache
  const uint8_t* stored = nullptr;
  const void* packed_data() const { return cached ? cached : packed.data(); }
};

struct LayerWeights {
  const float* attn_norm;  // (dim)
  Matrix wq;               // (n_heads*head_dim, dim)
  Matrix wk, wv;           // (n_kv_heads*head_dim, dim)
  Matrix wo;               // (dim, n_heads*head_dim)
  const float* ffn_norm;   // (dim)
  Matrix gate, up;         // (ffn_dim, dim)
  Matrix down;             // (dim, ffn_dim)
  const float* bq = nullptr;  // (n_heads*head_dim) with qkv_bias
  const float* bk = nullptr;  // (n_kv_heads*head_dim)
  const float* bv = nullptr;
  const float* q_norm = nullptr;  // (head_dim) with qk_norm
  const float* k_norm = nullptr;
  const float* attn_post_norm = nullptr;  // (dim) with post_norms
  const float* ffn_post_norm = nullptr;
  Matrix wgate;            // (n_heads*head_dim, dim) with attn_gate (Qwen3.5)

  // Qwen3.5 Gated DeltaNet layers (layer_linear) instead of wq/wk/wv/wo:
  Matrix ssm_qkv;          // (2*k_heads*k_dim + v_heads*v_dim, dim): q, k, v before the conv
  Matrix ssm_z;            // (v_heads*v_dim, dim): the output gate
  Matrix ssm_beta;         // (v_heads, dim): beta = sigmoid(x · ssm_beta)
  Matrix ssm_alpha;        // (v_heads, dim): decay input
  std::vector<float> ssm_conv_t;  // (conv_k, conv_dim): the conv kernel, tap-major
  const float* ssm_dt_bias = nullptr;  // (v_heads)
  const float* ssm_a = nullptr;        // (v_heads): -exp(A_log)
  const float* ssm_norm = nullptr;     // (v_dim): gated RMSNorm weight
  Matrix ssm_out;          // (dim, v_heads*v_dim)
};

struct Model::Impl {
  std::unique_ptr<MlbFile> file;
  ModelConfig cfg;
  std::unique_ptr<Tokenizer> tok;
  Matrix tok_embd;          // (n_vocab, dim); packed only when it is also the output
  const float* output_norm;  // (dim)
  Matrix output;            // (n_vocab, dim), or empty when tied (then tok_embd is used)
  std::vector<LayerWeights> layers;
  uint64_t packed_bytes = 0;
  std::unique_ptr<PackCache> pack_cache;  // mapped when --pack-cache found a valid file
  std::string load_note;                  // what the pack cache did, for the executables

  const Matrix& logits_matrix() const { return cfg.tie_embeddings ? tok_embd : output; }
};

}  // namespace krafla
