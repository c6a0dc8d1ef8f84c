// Mistral: Llama's layers with a sliding window (config "sliding_window"). llama.cpp writes
// Mistral checkpoints as "llama" GGUF files, so it has no GGUF name of its own.
#include "families/family.h"

namespace krafla {

extern const Family kMistral{.arch = "mistral"};

}  // namespace krafla
