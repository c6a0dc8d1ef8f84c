// Everything one sequence carries from one forward step to the next, and how the rows of a
// forward batch map onto sequences. Forward holds only per-batch scratch, so one Forward serves
// several of these — one after another, or together in one batch (ml_server's slots).
#pragma once
#include <span>
#include <vector>

#include "krafla/model.h"
#include "state/delta_state.h"
#include "state/kv_cache.h"

namespace krafla {

struct SequenceState {
  SequenceState(const ModelConfig& c, int n_ctx, KvType kv_type = KvType::F32)
      : kv(c, n_ctx, kv_type), linear(c) {}

  int n_ctx() const { return kv.n_ctx(); }
  // Back to position 0. The KV rows need no clearing (a position is written before it is
  // read); the DeltaNet state has folded in every token and must start from zero.
  void reset() { linear.reset(); }

  KvCache kv;           // attention layers
  delta::State linear;  // DeltaNet layers
};

// One sequence's share of a forward batch: rows [row0, row0 + n) are its tokens at positions
// pos0 .. pos0 + n - 1. Rows of one sequence are consecutive, and a sequence appears once.
struct SeqRows {
  enum class Logits { None, Last, All };
  SequenceState* seq;
  int row0, n, pos0;
  Logits logits = Logits::Last;  // which of its rows get logits
};

// The batch as the per-row steps see it: the sequence and position of every row.
struct BatchLayout {
  BatchLayout(std::span<const SeqRows> s) : segs(s) {
    for (size_t i = 0; i < s.size(); ++i)
      for (int t = 0; t < s[i].n; ++t) seg_of_row.push_back(int(i));
    n = int(seg_of_row.size());
  }
  const SeqRows& seg(int64_t row) const { return segs[seg_of_row[row]]; }
  int64_t pos(int64_t row) const { return seg(row).pos0 + (row - seg(row).row0); }

  std::span<const SeqRows> segs;
  std::vector<int> seg_of_row;  // [n]
  int n = 0;                    // rows in all
};

}  // namespace krafla
