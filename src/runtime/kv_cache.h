// One sequence's keys and values for the attention layers (DeltaNet layers keep theirs in
// delta::State): a slot per attention layer, each (kv_head, ctx, head_dim) for K and for V,
// stored in one element type for the whole cache.
//
// Memory is laid out in chunks of positions: (chunk, slot, kv_head, position in the chunk,
// row), a chunk about 2 MiB of K (or V). Filling the cache position by position then fills its
// memory front to back, so the buffers can use transparent huge pages and still be resident
// only as far as they are filled: a prompt's first tokens fault in one 2 MiB page of K and one
// of V instead of a 4 KiB page per (layer, head), which cost ~7% of a one-shot 128-token
// prompt here.
#pragma once
#include <cstdint>
#include <vector>

#include "krafla/kv_type.h"
#include "krafla/model.h"
#include "runtime/aligned.h"

namespace krafla {

class KvCache {
 public:
  // Throws krafla::Error for Q8_0 when head_dim is not a multiple of 32. chunk_positions:
  // positions per memory chunk (0: about 2 MiB of K per chunk, a multiple of 32 positions).
  KvCache(const ModelConfig& c, int n_ctx, KvType type = KvType::F32, int64_t chunk_positions = 0);

  KvType type() const { return type_; }
  int n_ctx() const { return n_ctx_; }
  size_t row_bytes() const { return row_bytes_; }  // one position of one head, K or V
  size_t size_bytes() const { return k_.size() + v_.size(); }
  int64_t chunk_positions() const { return chunk_; }

  // One (layer, kv_head)'s cached rows: position p's key starts at
  // k + (p / chunk) * chunk_bytes + (p % chunk) * row_bytes.
  struct HeadView {
    uint8_t* k;
    uint8_t* v;
    size_t row_bytes;
    KvType type;
    int64_t head_dim;
    int64_t chunk;       // positions per chunk: rows are contiguous within one
    size_t chunk_bytes;  // from one chunk to the next
    // How many rows from pos on are contiguous (to the end of pos's chunk).
    int64_t run(int64_t pos) const { return chunk - pos % chunk; }
    // Where position pos's row starts, from k or v.
    size_t offset(int64_t pos) const {
      return size_t(pos / chunk) * chunk_bytes + size_t(pos % chunk) * row_bytes;
    }
    // Rows [pos, pos+m) of K or V as m*head_dim floats, m <= run(pos): the cache's own memory
    // when it is F32, else converted into buf (room for m*head_dim floats) by the kernel table
    // (f16_to_f32, dequantize_row), exactly.
    const float* k_rows(int64_t pos, int64_t m, float* buf) const { return rows(k, pos, m, buf); }
    const float* v_rows(int64_t pos, int64_t m, float* buf) const { return rows(v, pos, m, buf); }

   private:
    const float* rows(const uint8_t* base, int64_t pos, int64_t m, float* buf) const;
  };
  // `layer` must be an attention layer.
  HeadView head(int layer, int kv_head) const;

  // Writes one token's key and value (head_dim floats each) for (layer, kv_head) at `pos`,
  // converted to type().
  void store(int layer, int kv_head, int64_t pos, const float* k, const float* v);

 private:
  KvType type_;
  int n_ctx_, n_kv_heads_;
  int64_t head_dim_;
  size_t row_bytes_;
  int64_t chunk_ = 0;       // positions per chunk
  size_t chunk_bytes_ = 0;  // (slot, kv_head, chunk, row_bytes)
  std::vector<int> slot_;   // [n_layers] the layer's slot, -1 for DeltaNet layers
  AlignedBuffer k_, v_;     // (chunk, attention layer, kv_head, position in chunk, row_bytes)
};

}  // namespace krafla
