// A dump of a .mlb model or .mlt tokenizer file, as gguf-dump does for GGUF: format version,
// config, tokenizer, every tensor (dtype, shape, bytes) and totals per dtype. Shared by
// `ml_tok info FILE` and `ml_run --info MODEL`.
#pragma once
#include <string>

namespace krafla::cli {

// Prints the dump of `path` on stdout: a readable report, or with json one JSON object (keys in
// docs/format.md's names). Validates the file as loading it would, without packing any weight;
// throws krafla::Error naming what is wrong (run_main turns that into one line and exit 2).
// Returns the exit status, 0.
int print_model_info(const std::string& path, bool json);

}  // namespace krafla::cli
