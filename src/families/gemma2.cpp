// Gemma 2: GeGLU, sandwich norms, attention and final soft-caps, a sliding window on every
// other layer (gemma.cpp holds what it shares with Gemma 3).
#include "families/gemma.h"

namespace krafla {
namespace {

void gemma2_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c) {
  gemma_gguf_config(g, p, c, true);
}

}  // namespace

extern const Family kGemma2{.arch = "gemma2",
                            .gguf_arch = "gemma2",
                            .gguf_config = gemma2_gguf_config,
                            .gguf_renames = kGemmaRenames};

}  // namespace krafla
