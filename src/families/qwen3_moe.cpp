// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B): Qwen3's attention with q/k
// norms, and Mixture-of-Experts MLPs on the layers config.json's decoder_sparse_step and
// mlp_only_layers name (ops/moe.h; docs/format.md "Mixture of Experts").
#include "families/moe.h"

namespace krafla {
namespace {

void qwen3_moe_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c) {
  c["qk_norm"] = true;
  gguf_moe_config(g, p, c, false);
}

}  // namespace

extern const Family kQwen3Moe{.arch = "qwen3_moe",
                              .gguf_arch = "qwen3moe",
                              .moe_layers = true,
                              .gguf_config = qwen3_moe_gguf_config};

}  // namespace krafla
