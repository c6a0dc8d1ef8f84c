// A GGUF file's tokenizer as the .mlb's two files: tokenizer.json and tokenizer_config.json
// texts with the vocabulary, merges, special tokens and flags of its tokenizer.ggml.* keys.
#pragma once
#include <string>

#include "io/gguf_file.h"

namespace krafla {

struct TokenizerFiles {
  std::string json, config;
};
TokenizerFiles gguf_tokenizer_files(const GgufFile& g);

}  // namespace krafla
