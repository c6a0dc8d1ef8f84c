// Qwen3-MoE (Qwen3-30B-A3B, Qwen3-Coder-30B-A3B, Qwen3-235B-A22B): Qwen3's attention with q/k
// norms, and Mixture-of-Experts MLPs on the layers config.json's decoder_sparse_step and
// mlp_only_layers name (ops/moe.h; docs/format.md "Mixture of Experts").
#include "families/family.h"

namespace krafla {

extern const Family kQwen3Moe{.arch = "qwen3_moe", .moe_layers = true};

}  // namespace krafla
