// Qwen3.5-MoE (Qwen3.5-35B-A3B, 122B-A10B): Qwen3.5's gated attention and Gated DeltaNet layers
// with a Mixture-of-Experts MLP on every layer, a shared expert beside the routed ones, and the
// routing weights always renormalised (ops/moe.h; docs/format.md "Mixture of Experts").
#include "families/moe.h"
#include "families/qwen35.h"

namespace krafla {
namespace {

void qwen35_moe_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c) {
  qwen35_gguf_config(g, p, c);
  gguf_moe_config(g, p, c, true);
}

bool qwen35_moe_gguf_relayout(const GgufFile& g, const nlohmann::json& c, TensorView v,
                              GgufImport& m) {
  return gguf_moe_relayout(v, m) || qwen35_gguf_relayout(g, c, std::move(v), m);
}

}  // namespace

extern const Family kQwen35Moe{.arch = "qwen3_5_moe",
                               .gguf_arch = "qwen35moe",
                               .linear_layers = true,
                               .moe_layers = true,
                               .gguf_config = qwen35_moe_gguf_config,
                               .gguf_renames = kQwen35Renames,
                               .gguf_reorders = qwen35_gguf_reorders,
                               .gguf_relayout = qwen35_moe_gguf_relayout};

}  // namespace krafla
