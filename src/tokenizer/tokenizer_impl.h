// Private state of krafla::Tokenizer, shared by tokenizer.cpp (loading, encoding) and
// stream_decoder.cpp (decoding).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "krafla/tokenizer.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/pre_tokenizer.h"

namespace krafla {

namespace tok {

struct AddedToken {
  std::string content;
  int32_t id;
  bool lstrip, rstrip, special;
};

// Byte trie over the added tokens' contents: longest match at a position, as the reference's
// DictionarySplitter (which walks UTF-16 units; for whole code points that is the same).
class AddedTrie {
 public:
  void insert(std::string_view s, int32_t index);
  // Index of the longest token starting at text[pos] (and its length), or -1.
  int32_t longest_match(std::string_view text, size_t pos, size_t& length) const;

 private:
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child node
  std::vector<int32_t> token_ = {-1};            // per node: added-token index ending here
};

}  // namespace tok

struct Tokenizer::Impl {
  tok::Vocab vocab;
  std::unique_ptr<tok::Normalizer> normalizer;
  std::unique_ptr<tok::PreTokenizer> pre_tokenizer;
  std::unique_ptr<tok::BpeModel> model;
  tok::DecoderPlan decoder;
  std::vector<tok::AddedToken> added;
  tok::AddedTrie trie;
  tok::AddedTrie plain_trie;   // the added tokens that are not special (parse_special=false)
  std::vector<uint8_t> flags;  // per id: kSpecial | kAdded
  static constexpr uint8_t kSpecial = 1, kAdded = 2;
  std::vector<int32_t> prefix_ids, suffix_ids;  // what the post-processor puts around the text
  bool cleanup = true;
  bool llama_non_legacy = false;  // LlamaTokenizer with legacy=false (transformers' rewrite)
  int32_t bos = -1, eos = -1;

  std::vector<int32_t> encode_text(std::string_view text, bool parse_special) const;
  void check_id(int32_t id) const;
};

}  // namespace krafla
