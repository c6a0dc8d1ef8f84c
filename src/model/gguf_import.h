// A GGUF file (llama.cpp's conventions) as the loader reads a .mlb: the docs/format.md config
// built from the `{arch}.*` keys (the shared ones here, the rest by the file's family,
// src/families/), tokenizer.json / tokenizer_config.json built from `tokenizer.ggml.*`, and
// the tensors under their .mlb names. Tensors are views into the mapping wherever the bytes
// can be used as they are; a few are remade in memory (llama q/k rows back to Hugging Face's
// RoPE order, BF16/F16 vectors widened to F32, the family's re-layouts).
#pragma once
#include "io/gguf_file.h"
#include "io/model_file.h"

namespace krafla {

// Throws krafla::Error naming the file and the key or tensor a model cannot be built from.
// ModelFile calls it on a GGUF file (model.cpp's open_model_file).
GgufImport import_gguf(const GgufFile& g);

}  // namespace krafla
