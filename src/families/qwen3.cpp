// Qwen3 (dense): Llama's layers with a per-head RMSNorm of q and k before RoPE.
#include "families/family.h"

namespace krafla {
namespace {

void qwen3_gguf_config(const GgufFile&, const std::string&, nlohmann::json& c) {
  c["qk_norm"] = true;
}

}  // namespace

extern const Family kQwen3{.arch = "qwen3", .gguf_arch = "qwen3", .gguf_config = qwen3_gguf_config};

}  // namespace krafla
