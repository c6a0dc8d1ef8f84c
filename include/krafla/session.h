// A session: one or more sequences (each with its KV cache and DeltaNet state) and the forward
// pass over them. The methods without a `seq` argument act on sequence 0.
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "krafla/imatrix.h"
#include "krafla/kv_type.h"
#include "krafla/model.h"
#include "krafla/profile.h"

namespace krafla {

struct SessionOptions {
  int n_threads = 0;             // 0: all cores
  int n_ctx = 0;                 // 0: the model's max context capped at 4096
  int n_batch = 128;             // prompt tokens per forward step (1..128)
  KvType kv_type = KvType::F32;  // the KV cache's element type
  int n_seqs = 1;                // independent sequences (ml_server's slots), n_ctx each
  // Qwen3.5 DeltaNet prefill: runs of at least this many tokens of one sequence (in one forward
  // step, so at most n_batch) use the chunked (WY) form in chunks of this size; 0: always the
  // token-by-token recurrence (the default: faster on the CPUs measured, and bit-identical
  // across --batch). 0..256; models without DeltaNet layers ignore it.
  int delta_chunk = 0;
  // Run on this session's threads instead of starting n_threads of its own (a draft model's
  // session beside the main one: two pools would spin against each other). The two sessions
  // must then be used from one thread, one at a time.
  const class Session* share_threads = nullptr;
};

// Tokens to append to one sequence, for Session::eval_batch.
struct SeqTokens {
  int seq;
  std::span<const int32_t> tokens;
  std::vector<float>* all_logits = nullptr;  // when given: receives [tokens, n_vocab] logits
};

class Session {
 public:
  Session(const Model& model, const SessionOptions& opts);
  ~Session();

  // Runs `tokens` at positions n_past() .. n_past()+n-1. Afterwards logits() holds the last
  // token's logits; when all_logits is given it receives [n, n_vocab] logits, row-major.
  // Throws krafla::Error for ids outside the vocabulary or when the context would overflow
  // (nothing is evaluated then).
  void eval(std::span<const int32_t> tokens, std::vector<float>* all_logits = nullptr);
  const std::vector<float>& logits(int seq = 0) const;
  // Appends tokens to several sequences at once: their tokens are packed into forward steps of
  // up to n_batch rows, so the sequences share every pass over the weights. Afterwards
  // logits(seq) holds each listed sequence's last token's logits. A sequence's results are
  // bitwise those of eval() on it alone. Each sequence may be listed once; everything is
  // validated (ids, room in each context) before anything is evaluated. A sequence listed with
  // all_logits gets every row's logits there, as eval() does.
  void eval_batch(std::span<const SeqTokens> work);

  const Model& model() const;
  int n_seqs() const;
  int n_past(int seq = 0) const;
  int n_ctx() const;  // per sequence
  int n_batch() const;
  int n_threads() const;
  KvType kv_type() const;
  size_t kv_bytes() const;  // the KV caches' size (all sequences; pages are touched as used)
  const std::vector<int32_t>& history(int seq = 0) const;  // the tokens in the cache, in order
  // Drops cached tokens past n (n <= n_past()). Models with linear-attention (DeltaNet)
  // layers can only truncate to 0: their state cannot be cut back (throws krafla::Error).
  void truncate(int n, int seq = 0);
  // Keeps the longest prefix of history() shared with `tokens` and returns its length; the
  // caller then evals the rest (at least one token, so logits() is fresh). With linear-
  // attention layers the prefix is kept only when `tokens` continues the whole history;
  // otherwise the session restarts from 0.
  int reuse_prefix(std::span<const int32_t> tokens, int seq = 0);
  // How many tokens reuse_prefix(tokens, seq) would keep, without changing anything.
  int shared_prefix(std::span<const int32_t> tokens, int seq) const;
  // Time every step of eval() (and generate()'s sampling) into *p from now on; null: stop.
  // The profile must outlive the session's use of it.
  void set_profile(Profile* p);
  Profile* profile() const;
  // Add every weight matrix's inputs of eval() to *m from now on (null: stop).
  void set_imatrix(Imatrix* m);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace krafla
