// The private side of krafla::Model: weights as the forward pass sees them.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "base/aligned.h"
#include "io/model_file.h"
#include "io/pack_cache.h"
#include "krafla/model.h"
#include "model/config.h"
#include "ops/attention.h"
#include "ops/delta.h"
#include "ops/matmul.h"
#include "ops/moe.h"

namespace krafla {

// One block's weights: the token mixer (attention or DeltaNet, by LayerConfig::kind), the MLP
// (dense, or Mixture-of-Experts by LayerConfig::moe), and the norms around them.
struct LayerWeights {
  const float* attn_norm;                 // (dim)
  AttentionWeights attn;                  // attention layers
  delta::Weights ssm;                     // Qwen3.5 Gated DeltaNet layers
  const float* attn_post_norm = nullptr;  // (dim) with post_norms
  const float* ffn_norm;                  // (dim)
  Matrix gate, up;                        // (ffn_dim, dim)
  Matrix down;                            // (dim, ffn_dim)
  moe::Weights moe;                       // instead of gate/up/down on MoE layers
  const float* ffn_post_norm = nullptr;   // (dim) with post_norms
};

// The token embedding's rows as Forward::embed looks them up, one token at a time: the loader
// decides which bytes serve (the stored ggml-layout rows, or a GGUF K-quant's rows in the file,
// decoded exactly) and the forward only asks for a row.
struct EmbeddingRows {
  const uint8_t* base = nullptr;  // row 0
  uint64_t row_bytes = 0;
  kernels::WType type = kernels::WType::F32;            // the rows' type when gguf_type is 0
  uint32_t gguf_type = 0;                               // a GGUF file's ggml type, decoded as such
  void get(int32_t id, float* out, int64_t dim) const;  // (dim) floats of row `id`
};

struct Model::Impl {
  std::unique_ptr<ModelFile> file;
  ModelConfig cfg;
  std::unique_ptr<Tokenizer> tok;
  Matrix tok_embd;           // (n_vocab, dim); packed only when it is also the output
  EmbeddingRows embd_rows;   // its rows, for the lookups
  const float* output_norm;  // (dim)
  Matrix output;             // (n_vocab, dim), or empty when tied (then tok_embd is used)
  std::vector<LayerWeights> layers;
  uint64_t packed_bytes = 0;
  uint64_t idle_expert_bytes = 0;         // per token: the packed experts it does not use
  std::unique_ptr<PackCache> pack_cache;  // mapped when --pack-cache found a valid file
  std::string load_note;                  // what the pack cache did, for the executables

  const Matrix& logits_matrix() const { return cfg.tie_embeddings ? tok_embd : output; }
};

const Model::Impl& model_impl(const Model& m);

}  // namespace krafla
