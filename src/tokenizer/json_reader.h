// Reads tokenizer.json with a SAX pass: the vocabulary and merges (hundreds of thousands of
// entries in Gemma 3's 33 MB file) go straight into flat vectors instead of a JSON DOM, which
// keeps loading well under a second; everything else becomes a small nlohmann::json.
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace krafla::tok {

struct TokenizerJson {
  nlohmann::json rest;  // the document without model.vocab and model.merges
  std::vector<std::pair<std::string, int32_t>> vocab;  // model.vocab, in file order
  bool has_vocab = false;
  // model.merges as written: "a b" strings have second empty and is_pair false.
  struct MergeEntry {
    std::string first, second;
    bool is_pair;
  };
  std::vector<MergeEntry> merges;
  bool has_merges = false;
};

// Throws krafla::Error with the parser's message on malformed JSON.
TokenizerJson read_tokenizer_json(std::string_view text);

}  // namespace krafla::tok
