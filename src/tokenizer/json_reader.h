// Reads tokenizer.json with a SAX pass: the vocabulary and merges (hundreds of thousands of
// entries in Gemma 3's 33 MB file) go straight into flat vectors instead of a JSON DOM, which
// keeps loading well under a second; everything else becomes a small nlohmann::json.
#pragma once
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace krafla::tok {

struct TokenizerJson {
  nlohmann::json rest;  // the document without model.vocab and model.merges
  // The strings of model.vocab and model.merges, back to back in one buffer (a million small
  // std::strings would cost more than the parse).
  std::string arena;
  struct VocabEntry {
    uint32_t offset, length;
    int32_t id;
  };
  std::vector<VocabEntry> vocab;  // in file order
  bool has_vocab = false;
  // A merge "a b" or ["a", "b"]: a = arena[offset, +left), b right after it, so a+b is the
  // contiguous arena[offset, +left+right).
  struct MergeEntry {
    uint32_t offset, left, right;
  };
  std::vector<MergeEntry> merges;
  bool has_merges = false;

  std::string_view view(uint32_t offset, uint32_t length) const {
    return std::string_view(arena).substr(offset, length);
  }
};

// Throws krafla::Error with the parser's message on malformed JSON.
TokenizerJson read_tokenizer_json(std::string_view text);

// Field `key` of `j` as an int in [lo, hi], `def` when absent (a `def` outside the range makes
// the field required); throws krafla::Error naming `what` and the key when it is missing or
// not an integer in that range (a float like 2.7e49 read as an
// int is undefined behaviour: found by fuzzing).
int int_field(const nlohmann::json& j, const char* key, int def, int lo, int hi, const char* what);

// The steps of a "Sequence" normalizer or pre-tokenizer, each built by T::from_json (a step
// that builds to nothing is dropped).
template <class T>
std::vector<std::unique_ptr<T>> sequence_steps(const nlohmann::json& list) {
  std::vector<std::unique_ptr<T>> steps;
  for (const auto& step : list)
    if (auto p = T::from_json(step)) steps.push_back(std::move(p));
  return steps;
}

}  // namespace krafla::tok
