// What Qwen3.5 and Qwen3.5-MoE share (qwen35.cpp); each has its own descriptor (qwen35.cpp,
// qwen35_moe.cpp).
#pragma once
#include "families/family.h"

namespace krafla {

// Qwen3.5's GGUF config: gated attention with q/k norms, the DeltaNet shape and layers, the
// multi-token-prediction blocks left out.
void qwen35_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c);
// attn_q (query and gate rows per head), and the DeltaNet matrices whose value heads llama.cpp
// tiles, rewritten into the .mlb's layout.
bool qwen35_gguf_reorders(const nlohmann::json& c, const std::string& leaf);
bool qwen35_gguf_relayout(const GgufFile& g, const nlohmann::json& c, TensorView v, GgufImport& m);

// The norm before the MLP (not a sandwich norm) and the DeltaNet tensors' names.
inline constexpr TensorRename kQwen35Renames[] = {
    {".post_attention_norm.weight", ".ffn_norm"},
    {".attn_qkv.weight", ".ssm_qkv"},
    {".attn_gate.weight", ".ssm_z"},
    {".ssm_conv1d.weight", ".ssm_conv"},
    {".ssm_a", ".ssm_a"},
};

}  // namespace krafla
