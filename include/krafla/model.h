// A loaded model: configuration, tokenizer and weights packed for this build's kernels.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "krafla/tokenizer.h"

namespace krafla {

// One layer's kind of token mixing, from the per-layer lists of docs/format.md.
struct LayerConfig {
  enum class Kind {
    Attention,  // GQA attention over the KV cache
    Linear,     // Gated DeltaNet ("linear attention", Qwen3.5): a fixed-size state, no KV cache
  };
  enum class Rope {
    None,    // no RoPE (SmolLM3's NoPE layers)
    Global,  // rope_freqs
    Local,   // rope_freqs_local (Gemma 3's sliding-window layers)
  };
  Kind kind = Kind::Attention;
  bool moe = false;    // the MLP is a Mixture-of-Experts block (ModelConfig::n_experts...)
  int head_dim = 0;    // this layer's attention head size (0: the model's head_dim)
  int n_kv_heads = 0;  // and KV heads (0: the model's n_kv_heads)
  int kv_source = -1;  // >= 0: an earlier layer whose K/V this one reads (none so far)
  int window = 0;      // sliding window: a query sees keys at distance < window; 0: full attention
  Rope rope = Rope::Global;
};

// The normalized configuration of docs/format.md ("config" in the metadata).
struct ModelConfig {
  std::string arch;  // llama, mistral, qwen2, qwen3, smollm3, gemma2, gemma3, qwen3_5, qwen3_moe,
                     // qwen3_5_moe
  int n_vocab = 0;
  int dim = 0;
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  int ffn_dim = 0;  // the dense MLP's; 0 when every layer is a MoE layer
  float norm_eps = 1e-5f;
  std::vector<float> rope_freqs;  // [rope_dim/2] inverse frequencies, scaling applied
  int rope_dim = 0;               // rotated dims at the start of each head (Qwen3.5: 1/4)
  float rope_attn_factor = 1.0f;
  int max_ctx = 0;
  int sliding_window = 0;  // 0: none
  bool tie_embeddings = false;
  int bos_id = -1;
  std::vector<int> eos_ids;
  std::string chat_template;  // suggested template name, "" if unknown
  bool qkv_bias = false;      // Qwen2: biases on the q/k/v projections
  bool qk_norm = false;       // Qwen3: per-head RMSNorm of q and k before RoPE
  enum class Activation { SiLU, GeluTanh } activation = Activation::SiLU;
  float embd_scale = 1.0f;     // Gemma: sqrt(dim)
  float attn_scale = 0.0f;     // q·k scale; 1/sqrt(head_dim) unless the file says otherwise
  float attn_softcap = 0.0f;   // Gemma 2: cap*tanh(score/cap); 0: off
  float final_softcap = 0.0f;  // Gemma 2: cap*tanh(logit/cap); 0: off
  bool post_norms = false;     // Gemma 2/3: RMSNorm on the attention and MLP outputs
  std::vector<float> rope_freqs_local;  // Gemma 3 local layers' inverse frequencies
  bool attn_gate = false;               // Qwen3.5: attention output times sigmoid(gate projection)
  // The shape of Qwen3.5's Gated DeltaNet layers (LayerConfig::Kind::Linear).
  int lin_k_heads = 0, lin_v_heads = 0, lin_k_dim = 0, lin_v_dim = 0, lin_conv = 0;
  // The Mixture-of-Experts layers' shape (LayerConfig::moe): E experts of which each token
  // uses k, each of intermediate size expert_ffn_dim; with shared_expert_ffn_dim > 0 a shared
  // expert every token uses (Qwen3.5-MoE).
  int n_experts = 0, n_experts_used = 0, expert_ffn_dim = 0, shared_expert_ffn_dim = 0;
  bool norm_topk_prob = false;      // the k routing weights are divided by their sum
  std::vector<LayerConfig> layers;  // [n_layers], from the per-layer lists and their defaults

  bool has_linear() const;
  bool has_moe() const;
  int n_moe_layers() const;
  int n_attn_layers() const;  // layers with a KV cache
  int64_t lin_conv_dim() const {
    return int64_t{2} * lin_k_heads * lin_k_dim + int64_t{lin_v_heads} * lin_v_dim;
  }
};

struct LoadOptions {
  int n_threads = 0;           // threads that pack the weights (0: all cores)
  std::string pack_cache_dir;  // non-empty: map packed weights from / write them to this dir
};

class Model {
 public:
  // Maps and validates `path`, parses the config and tokenizer, packs the weights using
  // n_threads threads (0: all cores). Throws krafla::Error naming what is wrong.
  static std::unique_ptr<Model> load(const std::string& path, int n_threads = 0);
  // The same; with a pack cache directory the packed weights are mapped from a cache file
  // made earlier for this file and ISA, or packed and written there (a stale or foreign cache
  // file is rewritten). A cache that cannot be written is not an error: load_note() says so.
  static std::unique_ptr<Model> load(const std::string& path, const LoadOptions& opts);
  ~Model();

  const std::string& path() const;
  const ModelConfig& config() const;
  const Tokenizer& tokenizer() const;
  std::string describe() const;  // one line: arch, size, weight types
  uint64_t packed_bytes() const;
  // What one token's forward reads of them: all but the experts a token does not use (k of E
  // in each Mixture-of-Experts layer); packed_bytes() for a dense model.
  uint64_t active_packed_bytes() const;
  const std::string& load_note() const;  // what the pack cache did ("" without one)

  struct Impl;  // the weights as the forward pass sees them (src/model/model_impl.h)

 private:
  // The library's own code (Session, Forward) reaches the weights through this; executables
  // see only the accessors above.
  friend const Impl& model_impl(const Model& m);
  explicit Model(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Loads only the tokenizer of a .mlb or .mlt file.
Tokenizer load_tokenizer(const std::string& path);

// One entry of a file's tensor table (docs/format.md).
struct TensorInfo {
  std::string name;
  std::string dtype;  // f32, f16, bf16, q8_0, q4_0, bytes
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // from data_offset
  uint64_t bytes = 0;
  std::string gguf_type;  // a GGUF tensor rewritten at load (dtype is what it runs as): the
                          // file's type, "Q6_K"; empty otherwise
};

// What a .mlb, .mlt or GGUF file holds, validated as load() validates it (header, metadata,
// every tensor's bounds, the config) but with no weight packed: for dumps such as ml_tok info.
struct ModelFileInfo {
  std::string path;
  std::string format;    // "krafla-mlb" or "gguf"
  std::string kind;      // "model" or "tokenizer"
  uint32_t version = 0;  // the format's version
  uint64_t file_size = 0;
  uint64_t data_offset = 0;
  std::optional<ModelConfig> config;  // model files only
  std::string source_json;            // the converter's free-form "source" object, as JSON text
  std::vector<TensorInfo> tensors;    // table order; the tokenizer's `bytes` entries included
};
ModelFileInfo inspect_model_file(const std::string& path);

}  // namespace krafla
