// The state a sequence carries through Qwen3.5's Gated DeltaNet layers (src/ops/delta.h runs
// them): per layer the convolution's last inputs and the recurrent state S.
#pragma once
#include <cstddef>
#include <vector>

#include "base/aligned.h"
#include "krafla/model.h"

namespace krafla::delta {

// One sequence's state of every DeltaNet layer: the conv history and the recurrent state.
class State {
 public:
  explicit State(const ModelConfig& c);
  void reset();                  // zeroes it all: a new sequence from position 0
  float* conv(int layer) const;  // (conv_k - 1, conv_dim), the oldest input row first
  float* ssm(int layer) const;   // (v_heads, k_dim, v_dim)

 private:
  std::vector<int> slot_;  // [n_layers] the layer's index below, -1 for attention layers
  size_t conv_elems_ = 0, ssm_elems_ = 0;  // per layer
  AlignedBuffer conv_;                     // (DeltaNet layer, conv_k - 1, conv_dim)
  AlignedBuffer ssm_;                      // (DeltaNet layer, v_heads, k_dim, v_dim)
};

}  // namespace krafla::delta
