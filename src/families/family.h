// A model family: everything that differs between architectures, in one descriptor per
// architecture (src/families/<arch>.cpp). The generic loader, config and forward pass ask the
// registry (families()) and never compare an architecture name; a family's file is the only
// place its rules live.
#pragma once
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "io/gguf_file.h"
#include "io/model_file.h"
#include "krafla/error.h"

namespace krafla {

// A GGUF tensor name's suffix and the .mlb suffix it becomes ("blk.3.post_ffw_norm.weight" →
// "blk.3.ffn_post_norm").
struct TensorRename {
  const char* gguf;
  const char* mlb;
};

struct Family {
  const char* arch;            // the .mlb config's "arch" (docs/format.md)
  const char* gguf_arch = "";  // llama.cpp's general.architecture; "": none of its own
  bool linear_layers = false;  // may hold Gated DeltaNet layers (config "layer_linear")
  bool moe_layers = false;     // may hold Mixture-of-Experts layers (config "layer_moe")
  // GGUF: llama.cpp's converter permuted the q/k rows of each head into interleaved pairs
  // (LLAMA_ROPE_TYPE_NORM); the import puts them back in rotate_half's order.
  bool interleaved_qk = false;
  // GGUF: the config beyond the keys every family shares (gguf_import.cpp's config_from);
  // p is "<gguf_arch>.".
  void (*gguf_config)(const GgufFile& g, const std::string& p, nlohmann::json& c) = nullptr;
  // GGUF tensor suffixes named otherwise here, tried before the shared ".weight"/".bias" rule.
  std::span<const TensorRename> gguf_renames = {};
  // GGUF tensors kept in another layout here: `gguf_reorders` names the leaves (by the
  // config) whose rows must be in memory (a K-quant rewritten whole first); `gguf_relayout`
  // writes a tensor's re-laid-out parts into m and returns true, or false for one it takes as
  // it is.
  bool (*gguf_reorders)(const nlohmann::json& c, const std::string& leaf) = nullptr;
  bool (*gguf_relayout)(const GgufFile& g, const nlohmann::json& c, TensorView v,
                        GgufImport& m) = nullptr;
};

// Every family this build runs, in the order messages list them.
std::span<const Family* const> families();
// nullptr when no family has that name.
const Family* find_family(std::string_view arch);
const Family* find_gguf_family(std::string_view gguf_arch);

// The error a family's GGUF rules throw: "<file>: <msg>".
[[noreturn]] inline void gguf_fail(const GgufFile& g, const std::string& msg) {
  throw Error(fmt::format("{}: {}", g.path(), msg));
}

}  // namespace krafla
