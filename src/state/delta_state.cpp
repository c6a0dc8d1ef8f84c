#include "state/delta_state.h"

#include <cstring>

namespace krafla::delta {

State::State(const ModelConfig& c) {
  int n_lin = 0;
  for (const LayerConfig& l : c.layers)
    slot_.push_back(l.kind == LayerConfig::Kind::Linear ? n_lin++ : -1);
  if (n_lin == 0) return;
  conv_elems_ = size_t(c.lin_conv - 1) * c.lin_conv_dim();
  ssm_elems_ = size_t(c.lin_v_heads) * c.lin_k_dim * c.lin_v_dim;
  conv_.resize(n_lin * conv_elems_ * sizeof(float));
  ssm_.resize(n_lin * ssm_elems_ * sizeof(float));
  reset();
}

void State::reset() {
  if (conv_.size()) std::memset(conv_.data(), 0, conv_.size());
  if (ssm_.size()) std::memset(ssm_.data(), 0, ssm_.size());
}

float* State::conv(int layer) const { return conv_.data<float>() + slot_[layer] * conv_elems_; }
float* State::ssm(int layer) const { return ssm_.data<float>() + slot_[layer] * ssm_elems_; }

}  // namespace krafla::delta
