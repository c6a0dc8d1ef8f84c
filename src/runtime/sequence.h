// Everything one sequence carries from one forward step to the next. Forward holds only
// per-batch scratch, so one Forward can serve several of these (one per sequence).
#pragma once
#include "krafla/model.h"
#include "ops/delta.h"
#include "runtime/kv_cache.h"

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

}  // namespace krafla
