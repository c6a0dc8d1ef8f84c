// Tokenizer: Hugging Face tokenizer.json (BPE: SentencePiece-style with byte fallback, and
// byte-level with a pre-tokenizer regex) read from the bytes the converter stored verbatim.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace krafla {

class Tokenizer {
 public:
  // Parses tokenizer.json and tokenizer_config.json (may be empty). Throws krafla::Error
  // naming the field that is missing or unsupported.
  static Tokenizer from_json(std::string_view tokenizer_json, std::string_view tokenizer_config);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // As the Hugging Face tokenizer's encode(text, add_special_tokens): add_special adds what
  // the post-processor adds (e.g. BOS). Special added tokens written in the text
  // ("<|im_start|>") are recognised unless parse_special is false; then they are tokenized as
  // plain text, as HF's split_special_tokens=True and llama.cpp's parse_special=false do (added
  // tokens that are not special are still recognised, as in both).
  std::vector<int32_t> encode(std::string_view text, bool add_special = true,
                              bool parse_special = true) const;
  // As decode(ids, skip_special_tokens). Throws krafla::Error on an id outside the vocabulary.
  std::string decode(std::span<const int32_t> ids, bool skip_special = false) const;

  int32_t vocab_size() const;                                     // including added tokens
  std::optional<int32_t> token_id(std::string_view token) const;  // exact vocab/added token
  std::string token_text(int32_t id) const;                       // the vocabulary string
  // The bytes one token stands for on its own, as llama.cpp's token_to_piece: byte-level
  // characters mapped back to bytes, "▁" as a space (no first-token strip), <0xNN> as its
  // byte. May be part of a UTF-8 sequence.
  std::string piece(int32_t id) const;
  std::string kind() const;  // "byte-level BPE", "BPE with byte fallback" or "BPE"
  int32_t n_added() const;   // added_tokens entries (the special ones among them too)
  bool is_special(int32_t id) const;
  int32_t bos_id() const;  // -1 when none (from tokenizer_config.json bos_token)
  int32_t eos_id() const;  // -1 when none (tokenizer_config.json eos_token)

  // Streams text token by token: push() returns the text that is complete (valid UTF-8) so
  // far; pieces split inside a character are held back until the rest arrives.
  class StreamDecoder {
   public:
    explicit StreamDecoder(const Tokenizer& tok, bool skip_special = false);
    std::string push(int32_t id);
    std::string flush();  // whatever is held back (invalid bytes as U+FFFD)

   private:
    std::string take_text();  // moves what is complete from raw_ through to the caller

    const Tokenizer* tok_;
    bool skip_special_;
    bool first_ = true;
    std::string pending_;   // decoded text held back for clean_up_tokenization_spaces
    std::string raw_;       // bytes that may still be the start of a UTF-8 sequence
    std::string run_head_;  // first bytes of a run of <0xNN> tokens (a leading BOM is dropped)
    bool in_byte_run_ = false;
    bool run_head_done_ = false;
    int strip_left_ = 0;  // leading characters the Strip decoder may still remove
  };

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace krafla
