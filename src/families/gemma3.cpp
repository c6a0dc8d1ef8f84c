// Gemma 3 (text): Gemma 2's layers with q/k norms instead of the attention soft-cap, five
// local sliding-window layers with their own RoPE base per global one (gemma.cpp holds what
// it shares with Gemma 2).
#include "families/gemma.h"

namespace krafla {
namespace {

void gemma3_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c) {
  gemma_gguf_config(g, p, c, false);
}

}  // namespace

extern const Family kGemma3{.arch = "gemma3",
                            .gguf_arch = "gemma3",
                            .gguf_config = gemma3_gguf_config,
                            .gguf_renames = kGemmaRenames};

}  // namespace krafla
