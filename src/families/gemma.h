// What Gemma 2 and Gemma 3 share (gemma.cpp); each has its own descriptor (gemma2.cpp,
// gemma3.cpp).
#pragma once
#include "families/family.h"

namespace krafla {

// Their GGUF config; `v2` picks Gemma 2's rules (soft-caps, no q/k norms, a window on every
// other layer, one RoPE base).
void gemma_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c, bool v2);

// The sandwich norms' GGUF names.
inline constexpr TensorRename kGemmaRenames[] = {
    {".post_attention_norm.weight", ".attn_post_norm"},
    {".post_ffw_norm.weight", ".ffn_post_norm"},
};

}  // namespace krafla
