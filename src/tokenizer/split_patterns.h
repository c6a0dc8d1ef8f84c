// The pre-tokenizer regexes of the models we support, matched by hand. std::regex has no
// \p{L}/\p{N}, and a general Unicode regex engine would be a dependency for a handful of
// patterns; so each known pattern string is recognised and mapped to a small matcher.
// Adding a model with a new pattern = adding its string and, if needed, a matcher variant.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace krafla::tok {

using Span = std::pair<size_t, size_t>;  // [begin, end) byte offsets

class SplitPattern {
 public:
  virtual ~SplitPattern() = default;
  // All non-overlapping matches, left to right, as the JS/Rust regex find-all would give them.
  virtual std::vector<Span> find_all(std::string_view text) const = 0;

  // Throws krafla::Error naming the pattern when it is not one we know.
  static std::unique_ptr<SplitPattern> from_regex(std::string_view regex);
  static std::unique_ptr<SplitPattern> literal(std::string needle);
  // The GPT-2 pattern, ByteLevel's built-in split when use_regex is true.
  static std::unique_ptr<SplitPattern> gpt2();
};

}  // namespace krafla::tok
