// One sequence's keys and values for the attention layers (DeltaNet layers keep theirs in
// delta::State): a slot per attention layer, each (kv_head, ctx, head_dim) for K and for V,
// stored in one element type for the whole cache.
#pragma once
#include <cstdint>
#include <vector>

#include "krafla/model.h"
#include "runtime/aligned.h"

namespace krafla {

// The element type of the cached rows. Only F32 is implemented; F16 and Q8_0 (ggml's 34-byte
// blocks, so a row is head_dim/32 blocks) are named here so the layout and views are already
// typed, and are refused by the constructor until the attention reads them.
enum class KvType { F32, F16, Q8_0 };

const char* kv_type_name(KvType t);

class KvCache {
 public:
  // Throws krafla::Error for a type this build cannot use yet.
  KvCache(const ModelConfig& c, int n_ctx, KvType type = KvType::F32);

  KvType type() const { return type_; }
  int n_ctx() const { return n_ctx_; }
  size_t row_bytes() const { return row_bytes_; }  // one position of one head, K or V
  size_t size_bytes() const { return k_.size() + v_.size(); }

  // One (layer, kv_head)'s cached rows: position p's key starts at k + p * row_bytes.
  struct HeadView {
    uint8_t* k;
    uint8_t* v;
    size_t row_bytes;
    // Position pos onward as floats: an F32 cache only.
    const float* k_f32(int64_t pos) const {
      return reinterpret_cast<const float*>(k + pos * row_bytes);
    }
    const float* v_f32(int64_t pos) const {
      return reinterpret_cast<const float*>(v + pos * row_bytes);
    }
  };
  // `layer` must be an attention layer.
  HeadView head(int layer, int kv_head) const;

  // Writes one token's key and value (head_dim floats each) for (layer, kv_head) at `pos`,
  // converted to type().
  void store(int layer, int kv_head, int64_t pos, const float* k, const float* v);

 private:
  KvType type_;
  int n_ctx_, n_kv_heads_;
  size_t row_bytes_;
  std::vector<int> slot_;  // [n_layers] the layer's slot, -1 for DeltaNet layers
  AlignedBuffer k_, v_;    // (attention layer, kv_head, ctx, row_bytes)
};

}  // namespace krafla
