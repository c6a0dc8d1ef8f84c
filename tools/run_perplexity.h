// ml_run --perplexity FILE: the perplexity of a text, llama-perplexity's scoring on request,
// and the KL divergence to a base model's saved log-probabilities (docs/perplexity.md).
#pragma once
#include <string>

#include "krafla/imatrix.h"
#include "krafla/kv_type.h"
#include "krafla/model.h"

namespace krafla::cli {

struct PerplexityArgs {
  std::string text_path;        // the text to score (- for stdin)
  std::string text;             // its contents, read before the model loads
  std::string scoring = "all";  // all: every prediction of a chunk; llama: its second half only
  int n_ctx = 0;                // tokens per chunk; 0: 512, capped at the model's context
  int chunks = -1;              // < 0: all
  int n_threads = 0, n_batch = 128;
  std::string kl_base;         // --kl-divergence-base FILE
  bool kl = false;             // --kl-divergence: compare with kl_base instead of writing it
  bool json = false;           // the result as one JSON object on stdout
  bool profile = false;        // print the time per step of the forward pass afterwards
  Imatrix* imatrix = nullptr;  // --imatrix: add the matrices' input statistics here
  KvType kv = KvType::F32;     // --kv
  int delta_chunk = 0;         // --delta-chunk (SessionOptions::delta_chunk)
};

// Prints a progress line per chunk on stderr and the result on stdout; returns the exit code
// (130 when Ctrl-C stopped it: the chunks done so far are reported).
int run_perplexity(const Model& model, const PerplexityArgs& a);

}  // namespace krafla::cli
