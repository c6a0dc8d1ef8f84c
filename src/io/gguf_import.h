// A GGUF file (llama.cpp's conventions) as the loader reads a .mlb: the docs/format.md config
// built from the `{arch}.*` keys, tokenizer.json / tokenizer_config.json built from
// `tokenizer.ggml.*`, and the tensors under their .mlb names. Tensors are views into the
// mapping wherever the bytes can be used as they are; a few are remade in memory (llama q/k
// rows back to Hugging Face's RoPE order, BF16/F16 vectors widened to F32).
#pragma once
#include <deque>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "io/gguf_file.h"
#include "io/model_file.h"
#include "runtime/aligned.h"

namespace krafla {

struct GgufImport {
  nlohmann::json meta;              // as a .mlb's: format, kind, config, tokenizer, tensors, source
  std::vector<TensorView> tensors;  // .mlb names, plus the two tokenizer `bytes` entries
  std::deque<AlignedBuffer> owned;  // memory of the views that are not in the mapping
};

// Throws krafla::Error naming the file and the key or tensor a model cannot be built from.
GgufImport import_gguf(const GgufFile& g);

// tokenizer.json and tokenizer_config.json texts with the vocabulary, merges, special tokens
// and flags of the file's tokenizer.ggml.* keys (gguf_tokenizer.cpp).
struct TokenizerFiles {
  std::string json, config;
};
TokenizerFiles gguf_tokenizer_files(const GgufFile& g);

}  // namespace krafla
