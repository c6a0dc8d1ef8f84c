// The BPE model of tokenizer.json ("model": {"type": "BPE", ...}): merges by rank, optional
// byte fallback (<0xNN> tokens), unk token, ignore_merges.
#pragma once
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/flat_index.h"
#include "tokenizer/json_reader.h"

namespace krafla::tok {

// Token strings and ids: the model's vocabulary plus the added tokens (as the reference does,
// added tokens are looked up like any other token).
struct Vocab {
  // Ids index `tokens`, so an id is bounded: 16 times the largest vocabulary in use (Gemma 3's
  // 262,144), where a fuzzed 2^31 once asked for 34 GB.
  static constexpr int32_t kMaxId = (1 << 22) - 1;
  std::vector<std::string> tokens;  // by id; "" for holes
  TokenIndex index;                 // string -> id

  std::optional<int32_t> find(std::string_view s) const;
  void set(const std::string& token, int32_t id);
};

class BpeModel {
 public:
  // Fills `vocab` from model.vocab; call before adding the added tokens.
  static void read_vocab(TokenizerJson& file, Vocab& vocab);
  // Reads the options of the "model" object and file.merges; `vocab` must be complete (model
  // vocabulary and added tokens): merges are keyed by the ids encode_word() will look up.
  BpeModel(const nlohmann::json& model, const TokenizerJson& file, const Vocab& vocab);

  // Encodes one pre-tokenized word, appending ids. `vocab` must be the one given above.
  void encode_word(std::string_view word, const Vocab& vocab, std::vector<int32_t>& out) const;
  // Collapses runs of unk ids produced by one section, when the model says fuse_unk.
  void fuse_unknown(std::vector<int32_t>& ids, size_t from) const;

 private:
  int32_t symbol(std::string_view s, const Vocab& vocab) const;
  void emit(std::string_view piece, int32_t sym, const Vocab& vocab,
            std::vector<int32_t>& out) const;

  struct Merge {
    int32_t rank;
    int32_t result;  // symbol id of the merged string
  };
  static uint64_t key(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }
  PairMap<Merge> merges_;
  // Strings that occur in merges but not in the vocabulary get symbol ids from kExtraBase up.
  static constexpr int32_t kExtraBase = 1 << 30;
  std::vector<std::string> extra_tokens_;
  TokenIndex extra_;
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool byte_fallback_ = false;
  bool ignore_merges_ = false;
  int32_t byte_ids_[256];  // <0xNN> token ids, -1 when absent
};

}  // namespace krafla::tok
