// What the Mixture-of-Experts families share in their GGUF rules (moe.cpp); each family has
// its own descriptor (qwen3_moe.cpp, qwen35_moe.cpp).
#pragma once
#include "families/family.h"

namespace krafla {

// The MoE keys of the config from llama.cpp's (expert_count, expert_used_count,
// expert_feed_forward_length, expert_shared_feed_forward_length when `shared`), the sparse
// layers from where a router tensor (blk.N.ffn_gate_inp) is, and norm_topk_prob: llama.cpp
// renormalises the top-k weights of both Qwen MoE families whatever the file says.
void gguf_moe_config(const GgufFile& g, const std::string& p, nlohmann::json& c, bool shared);

// The shared expert's gate: a vector [dim] in llama.cpp's files, a [1, dim] matrix here.
// Returns false for any other tensor.
bool gguf_moe_relayout(TensorView& v, GgufImport& m);

}  // namespace krafla
