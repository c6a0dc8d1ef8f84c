// The decoder of tokenizer.json ("decoder") reduced to the steps a streaming decoder needs.
// The reference applies the chain to the whole token list; every supported chain is local
// except for Strip (start of the whole text) and Metaspace (first token), which the stream
// state tracks, and byte runs (ByteFallback) whose UTF-8 is completed across tokens.
#pragma once
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <utility>
#include <vector>

namespace krafla::tok {

struct DecoderPlan {
  bool join_with_space = false;  // no decoder: tokens joined by " " (as the reference)
  std::vector<std::pair<std::string, std::string>> replacements;  // per non-byte token
  bool byte_fallback = false;                                     // <0xNN> tokens are bytes
  bool byte_level = false;         // GPT-2 byte-to-unicode, except for added tokens
  bool strip_first_token = false;  // Metaspace with a prefix space: first token loses one " "
  int strip_start = 0;             // Strip decoder: leading strip_char removed, at most this many
  char strip_char = ' ';

  static DecoderPlan from_json(const nlohmann::json& j);  // throws on unsupported steps
};

// transformers' clean_up_tokenization: " ." -> "." etc., applied by the reference after
// decoding when tokenizer_config.json's clean_up_tokenization_spaces is true (its default).
std::string clean_up_tokenization(std::string text);
// Longest prefix of text after which clean_up_tokenization can be applied independently (no
// pattern can straddle it): none of the last 3 bytes before the cut is a space.
size_t cleanup_safe_prefix(std::string_view text);

}  // namespace krafla::tok
