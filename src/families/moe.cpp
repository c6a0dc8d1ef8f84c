#include "families/moe.h"

#include <cmath>

namespace krafla {

void gguf_moe_config(const GgufFile& g, const std::string& p, nlohmann::json& c, bool shared) {
  const int64_t n = c["n_layers"];
  std::vector<bool> moe(static_cast<size_t>(n));
  for (const GgufTensor& t : g.tensors()) {
    if (!t.name.starts_with("blk.") || !t.name.ends_with(".ffn_gate_inp.weight")) continue;
    const int64_t i = std::strtoll(t.name.c_str() + 4, nullptr, 10);
    if (i >= 0 && i < n) moe[size_t(i)] = true;
  }
  c["layer_moe"] = moe;
  c["n_experts"] = g.integer(p + "expert_count");
  c["n_experts_used"] = g.integer(p + "expert_used_count");
  c["expert_ffn_dim"] = g.integer(p + "expert_feed_forward_length");
  c["shared_expert_ffn_dim"] = shared ? g.integer(p + "expert_shared_feed_forward_length") : 0;
  c["norm_topk_prob"] = true;
  if (const double s = g.number(p + "expert_weights_scale", 1.0); s != 0.0 && s != 1.0)
    gguf_fail(g, fmt::format("{}expert_weights_scale {} is not supported (1 only)", p, s));
}

bool gguf_moe_relayout(TensorView& v, GgufImport& m) {
  if (!v.name.ends_with(".ffn_gate_inp_shexp") || v.shape.size() != 1) return false;
  v.shape = {1, v.shape[0]};
  m.tensors.push_back(std::move(v));
  return true;
}

}  // namespace krafla
