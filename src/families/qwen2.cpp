// Qwen2 / Qwen2.5: Llama's layers with biases on the q/k/v projections.
#include "families/family.h"

namespace krafla {
namespace {

void qwen2_gguf_config(const GgufFile&, const std::string&, nlohmann::json& c) {
  c["qkv_bias"] = true;
}

}  // namespace

extern const Family kQwen2{.arch = "qwen2", .gguf_arch = "qwen2", .gguf_config = qwen2_gguf_config};

}  // namespace krafla
