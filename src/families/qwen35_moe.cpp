// Qwen3.5-MoE (Qwen3.5-35B-A3B, 122B-A10B): Qwen3.5's gated attention and Gated DeltaNet layers
// with a Mixture-of-Experts MLP on every layer, a shared expert beside the routed ones, and the
// routing weights always renormalised (ops/moe.h; docs/format.md "Mixture of Experts").
#include "families/family.h"

namespace krafla {

extern const Family kQwen35Moe{.arch = "qwen3_5_moe", .linear_layers = true, .moe_layers = true};

}  // namespace krafla
