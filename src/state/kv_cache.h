// One sequence's keys and values for the attention layers (DeltaNet layers keep theirs in
// delta::State): a slot per attention layer that owns its K/V, each (kv_head, ctx, head_dim)
// of that layer's own head count and size, for K and for V, stored in one element type for the
// whole cache. A layer that reads an earlier layer's K/V (LayerConfig::kv_source) has no slot
// of its own: it sees its source's.
//
// Memory is laid out in chunks of positions: (chunk, slot, kv_head, position in the chunk,
// row). The first chunk is about 2 MiB of K (or V); the next ones double in size until a
// chunk holds 64 KiB of each head's rows (or the first chunk's size, if that is more), and
// the rest are that size. Filling the cache position by position then fills its memory front
// to back, so the buffers can use transparent huge pages and still be resident only as far as
// they are filled (at most twice that): a prompt's first tokens fault in one 2 MiB page of K
// and one of V instead of a 4 KiB page per (layer, head), which cost ~7% of a one-shot
// 128-token prompt here. Deep in a long context attention reads each head's rows in runs of
// 64 KiB or more, which stream faster than the first chunk's (16 KiB on the 1B shape: a
// token's attention at depth 8192 1.2-1.6x faster, docs/benchmarks.md).
#pragma once
#include <bit>
#include <cstdint>
#include <vector>

#include "base/aligned.h"
#include "krafla/kv_type.h"
#include "krafla/model.h"

namespace krafla {

class KvCache {
 public:
  // Throws krafla::Error for Q8_0 when a head size is not a multiple of 32. chunk_positions:
  // positions of every memory chunk (0: the sizes above, multiples of 32 positions).
  KvCache(const ModelConfig& c, int n_ctx, KvType type = KvType::F32, int64_t chunk_positions = 0);

  KvType type() const { return type_; }
  int n_ctx() const { return n_ctx_; }
  // One position of one head, K or V: the smallest (every head's when the layers share a size).
  size_t row_bytes() const { return row_bytes_; }
  size_t size_bytes() const { return k_.size() + v_.size(); }
  int64_t first_chunk_positions() const { return first_; }
  int64_t chunk_positions() const { return chunk_; }  // of the chunks past the doubling ones

  // One (layer, kv_head)'s cached rows: position p's key starts at k + offset(p).
  struct HeadView {
    uint8_t* k;  // the whole cache's K and V
    uint8_t* v;
    size_t row_bytes;
    KvType type;
    int64_t head_dim;
    int64_t first;      // positions in the first chunk; chunk i < doublings has first << i
    int64_t chunk;      // positions in each chunk after those
    int64_t steady;     // where the first of those starts: first * (2^doublings - 1)
    size_t head_bytes;  // one position's bytes of the slots and heads before this one
    size_t per_pos;     // bytes of one position over every slot and head
    struct Span {
      int64_t start, size;  // positions
    };
    // The chunk holding position pos; rows are contiguous within one.
    Span chunk_of(int64_t pos) const {
      if (pos >= steady) return {steady + (pos - steady) / chunk * chunk, chunk};
      const int i = std::bit_width(uint64_t(pos / first + 1)) - 1;
      return {first * ((int64_t{1} << i) - 1), first << i};
    }
    // How many rows from pos on are contiguous (to the end of pos's chunk).
    int64_t run(int64_t pos) const {
      const Span c = chunk_of(pos);
      return c.start + c.size - pos;
    }
    // Where position pos's row starts, from k or v.
    size_t offset(int64_t pos) const {
      const Span c = chunk_of(pos);
      return size_t(c.start) * per_pos + head_bytes * size_t(c.size) +
             size_t(pos - c.start) * row_bytes;
    }
    // Rows [pos, pos+m) of K or V as m*head_dim floats, m <= run(pos): the cache's own memory
    // when it is F32, else converted into buf (room for m*head_dim floats) by the kernel table
    // (f16_to_f32, dequantize_row), exactly.
    const float* k_rows(int64_t pos, int64_t m, float* buf) const { return rows(k, pos, m, buf); }
    const float* v_rows(int64_t pos, int64_t m, float* buf) const { return rows(v, pos, m, buf); }
    // The same rows of an F16 cache as it stores them (for the kernel table's *_rows_f16).
    const uint16_t* k_halves(int64_t pos, int64_t m) const { return halves(k, pos, m); }
    const uint16_t* v_halves(int64_t pos, int64_t m) const { return halves(v, pos, m); }

   private:
    const float* rows(const uint8_t* base, int64_t pos, int64_t m, float* buf) const;
    const uint16_t* halves(const uint8_t* base, int64_t pos, int64_t m) const;
  };
  // `layer` must be an attention layer (a KV-sharing one gets its source's heads).
  HeadView head(int layer, int kv_head) const;
  int n_slots() const { return int(slots_.size()); }

  // Writes one token's key and value (the layer's head_dim floats each) for (layer, kv_head)
  // at `pos`, converted to type().
  void store(int layer, int kv_head, int64_t pos, const float* k, const float* v);

 private:
  struct Slot {
    int n_kv_heads;
    int64_t head_dim;
    size_t row_bytes;
    size_t head_bytes;  // one position's bytes of the slots before this one
  };
  KvType type_;
  int n_ctx_;
  size_t row_bytes_ = 0;
  std::vector<Slot> slots_;
  size_t per_pos_ = 0;     // one position of every slot and head, K or V
  int64_t first_ = 0;      // positions in the first chunk
  int64_t chunk_ = 0;      // in each chunk past the doubling ones
  int64_t steady_ = 0;     // the position where those start
  std::vector<int> slot_;  // [n_layers] the layer's slot (its source's), -1 for DeltaNet layers
  AlignedBuffer k_, v_;    // (chunk, attention layer, kv_head, position in chunk, row_bytes)
};

}  // namespace krafla
