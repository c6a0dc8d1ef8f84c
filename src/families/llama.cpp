// Llama 2/3 (and TinyLlama, SmolLM2, Llama 3.1-style RoPE scaling through rope_freqs.weight,
// which every family's import reads): the plain pre-norm SwiGLU transformer.
#include "families/family.h"

namespace krafla {

extern const Family kLlama{.arch = "llama", .gguf_arch = "llama", .interleaved_qk = true};

}  // namespace krafla
