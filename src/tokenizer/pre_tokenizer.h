// Pre-tokenizers of tokenizer.json ("pre_tokenizer"): split a normalized section into words
// that BPE encodes independently.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace krafla::tok {

class PreTokenizer {
 public:
  virtual ~PreTokenizer() = default;
  // Splits each word of `words` further. section_index is the position of the section among
  // the added-token split of the text (Metaspace's prepend_scheme "first" needs it).
  virtual std::vector<std::string> split(std::vector<std::string> words,
                                         size_t section_index) const = 0;

  // nullptr for a JSON null; throws krafla::Error naming an unsupported type, field or pattern.
  static std::unique_ptr<PreTokenizer> from_json(const nlohmann::json& j);
  // The Metaspace pre-tokenizer as LlamaTokenizer with legacy=false builds it.
  static std::unique_ptr<PreTokenizer> metaspace(std::string replacement, bool prepend_first_only);
};

// GPT-2's byte-to-unicode table: byte b is written as code point byte_to_unicode(b), so that
// every byte has a printable stand-in; unicode_to_byte is its inverse (-1 for other chars).
char32_t byte_to_unicode(uint8_t b);
int unicode_to_byte(char32_t cp);

}  // namespace krafla::tok
