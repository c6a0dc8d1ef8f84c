// SmolLM3: Llama's layers, every fourth without RoPE (NoPE).
#include "families/family.h"

namespace krafla {
namespace {

// llama.cpp's SmolLM3: every fourth layer has no RoPE (n_no_rope_layer_step), a fixed rule
// rather than a key of the file.
void smollm3_gguf_config(const GgufFile&, const std::string&, nlohmann::json& c) {
  std::vector<bool> rope;
  for (int64_t i = 0; i < c["n_layers"].get<int64_t>(); ++i) rope.push_back((i + 1) % 4 != 0);
  c["layer_rope"] = rope;
}

}  // namespace

extern const Family kSmolLM3{.arch = "smollm3",
                             .gguf_arch = "smollm3",
                             .interleaved_qk = true,
                             .gguf_config = smollm3_gguf_config};

}  // namespace krafla
