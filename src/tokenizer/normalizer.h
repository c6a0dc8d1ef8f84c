// Normalizers of tokenizer.json ("normalizer"), applied to each text section between added
// tokens, before pre-tokenization.
#pragma once
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>

namespace krafla::tok {

class Normalizer {
 public:
  virtual ~Normalizer() = default;
  virtual std::string normalize(std::string text) const = 0;

  // nullptr for a JSON null; throws krafla::Error naming an unsupported type.
  static std::unique_ptr<Normalizer> from_json(const nlohmann::json& j);
};

// Replaces every occurrence of `from` (a literal, not a regex) by `to`.
std::string replace_all(std::string_view text, std::string_view from, std::string_view to);
// JS String.prototype.trimStart / trimEnd (the reference is JS; see unicode::is_js_space).
std::string_view trim_start(std::string_view s);
std::string_view trim_end(std::string_view s);
// The literal of a pattern object {"String": ...}; a {"Regex": ...} is refused, naming `where`.
std::string literal_pattern(const nlohmann::json& pattern, std::string_view where);

}  // namespace krafla::tok
