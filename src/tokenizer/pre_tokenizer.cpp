#include "tokenizer/pre_tokenizer.h"

#include <fmt/format.h>

#include <array>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <string_view>

#include "krafla/error.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/split_patterns.h"
#include "tokenizer/unicode.h"

namespace krafla::tok {

namespace {

struct ByteTables {
  std::array<char32_t, 256> to_cp{};
  std::array<int16_t, 324> to_byte{};
  ByteTables() {
    to_byte.fill(-1);
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
      to_cp[b] = printable ? b : 256 + n++;
      to_byte[to_cp[b]] = static_cast<int16_t>(b);
    }
  }
};
const ByteTables& byte_tables() {
  static const ByteTables t;
  return t;
}

class PreSequence final : public PreTokenizer {
 public:
  explicit PreSequence(std::vector<std::unique_ptr<PreTokenizer>> items)
      : items_(std::move(items)) {}
  std::vector<std::string> split(std::vector<std::string> words, size_t section) const override {
    for (const auto& p : items_) words = p->split(std::move(words), section);
    return words;
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> items_;
};

// The JS reference treats every behavior but "Removed" as "Isolated" (matches and the text
// between them are separate words); with invert it keeps only the matches. Hugging Face would
// honour MergedWithPrevious/Next; the only such file we know (Gemma 3, splitting on " ") never
// sees a space because its normalizer has already replaced them, so both agree there.
class Split final : public PreTokenizer {
 public:
  Split(std::unique_ptr<SplitPattern> pattern, bool invert, bool removed)
      : pattern_(std::move(pattern)), invert_(invert), removed_(removed) {}
  std::vector<std::string> split(std::vector<std::string> words, size_t) const override {
    std::vector<std::string> out;
    for (const auto& w : words) {
      size_t prev = 0;
      for (auto [a, b] : pattern_->find_all(w)) {
        if (!invert_ && a > prev) out.emplace_back(w.substr(prev, a - prev));
        if (!removed_ || invert_) out.emplace_back(w.substr(a, b - a));
        prev = b;
      }
      if (!invert_ && prev < w.size()) out.emplace_back(w.substr(prev));
    }
    return out;
  }

 private:
  std::unique_ptr<SplitPattern> pattern_;
  bool invert_, removed_;
};

class ByteLevel final : public PreTokenizer {
 public:
  ByteLevel(bool add_prefix_space, bool use_regex)
      : add_prefix_space_(add_prefix_space), pattern_(use_regex ? SplitPattern::gpt2() : nullptr) {}
  std::vector<std::string> split(std::vector<std::string> words, size_t) const override {
    std::vector<std::string> out;
    for (auto& w : words) {
      if (add_prefix_space_ && (w.empty() || w[0] != ' ')) w.insert(w.begin(), ' ');
      if (!pattern_) {
        out.push_back(map_bytes(w));
        continue;
      }
      for (auto [a, b] : pattern_->find_all(w))
        out.push_back(map_bytes(std::string_view(w).substr(a, b - a)));
    }
    return out;
  }

 private:
  static std::string map_bytes(std::string_view s) {
    std::string out;
    out.reserve(s.size() * 2);
    for (unsigned char c : s) unicode::append_utf8(out, byte_tables().to_cp[c]);
    return out;
  }
  bool add_prefix_space_;
  std::unique_ptr<SplitPattern> pattern_;
};

// Digits: runs of digits are cut from the rest; with individual_digits every digit is a word
// of its own. The reference's pattern is [^\d]+|\d+ (or |\d) with JavaScript's \d, which is
// ASCII 0-9 even with the u flag; Hugging Face uses char::is_numeric (every \p{N}), so the two
// differ on other numerals ("①②③", "٣٤٥", "𝟘𝟙𝟚"), which only the Rust library cuts apart.
class Digits final : public PreTokenizer {
 public:
  explicit Digits(bool individual) : individual_(individual) {}
  std::vector<std::string> split(std::vector<std::string> words, size_t) const override {
    std::vector<std::string> out;
    auto digit = [](char c) { return c >= '0' && c <= '9'; };
    for (const auto& w : words) {
      for (size_t p = 0; p < w.size();) {
        size_t e = p + 1;
        if (!digit(w[p])) {
          while (e < w.size() && !digit(w[e])) ++e;
        } else if (!individual_) {
          while (e < w.size() && digit(w[e])) ++e;
        }
        out.emplace_back(w, p, e - p);
        p = e;
      }
    }
    return out;
  }

 private:
  bool individual_;
};

// Spaces become the replacement character (U+2581), a replacement character is prepended per
// prepend_scheme, and the text is split before each replacement character (Hugging Face's
// split=true; the JS reference does not split, which only matters for runs of spaces).
class Metaspace final : public PreTokenizer {
 public:
  Metaspace(std::string replacement, std::string scheme, bool split)
      : rep_(std::move(replacement)), scheme_(std::move(scheme)), split_(split) {}
  std::vector<std::string> split(std::vector<std::string> words, size_t section) const override {
    std::vector<std::string> out;
    for (const auto& w : words) {
      std::string s = replace_all(w, " ", rep_);
      bool prepend = scheme_ == "always" || (scheme_ == "first" && section == 0);
      if (prepend && s.compare(0, rep_.size(), rep_) != 0) s = rep_ + s;
      if (!split_) {
        out.push_back(std::move(s));
        continue;
      }
      size_t start = 0;
      for (size_t q = s.find(rep_, 1); q != std::string::npos; q = s.find(rep_, q + 1)) {
        out.push_back(s.substr(start, q - start));
        start = q;
      }
      out.push_back(s.substr(start));
    }
    return out;
  }

 private:
  std::string rep_, scheme_;
  bool split_;
};

}  // namespace

char32_t byte_to_unicode(uint8_t b) { return byte_tables().to_cp[b]; }
int unicode_to_byte(char32_t cp) { return cp < 324 ? byte_tables().to_byte[cp] : -1; }

std::unique_ptr<PreTokenizer> PreTokenizer::metaspace(std::string replacement,
                                                      bool prepend_first_only) {
  // transformers builds it with split=False: SentencePiece keeps runs of "▁" together.
  return std::make_unique<Metaspace>(std::move(replacement),
                                     prepend_first_only ? "first" : "always", false);
}

namespace {

// Refuses a field that would change the ids but is not implemented, naming it.
void check_fields(const nlohmann::json& j, const std::string& type,
                  std::initializer_list<std::string_view> known) {
  for (const auto& [key, value] : j.items()) {
    bool ok = key == "type";
    for (auto k : known) ok = ok || key == k;
    if (!ok)
      throw Error(
          fmt::format("tokenizer.json: unsupported field '{}' of the {} pre-tokenizer", key, type));
  }
}

}  // namespace

std::unique_ptr<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "Sequence")
    return std::make_unique<PreSequence>(sequence_steps<PreTokenizer>(j.at("pretokenizers")));
  if (type == "Split") {
    const auto& pat = j.at("pattern");
    auto pattern = pat.contains("Regex")
                       ? SplitPattern::from_regex(pat["Regex"].get<std::string>())
                       : SplitPattern::literal(literal_pattern(pat, "Split pre-tokenizer"));
    std::string behavior = j.value("behavior", "Isolated");
    return std::make_unique<Split>(std::move(pattern), j.value("invert", false),
                                   behavior == "Removed");
  }
  if (type == "ByteLevel") {
    // trim_offsets only moves offsets, which krafla does not report. add_prefix_space is
    // applied to every word that reaches it (after a Digits split too), as both libraries do.
    check_fields(j, type, {"add_prefix_space", "trim_offsets", "use_regex"});
    return std::make_unique<ByteLevel>(j.value("add_prefix_space", false),
                                       j.value("use_regex", true));
  }
  if (type == "Digits") {
    check_fields(j, type, {"individual_digits"});
    return std::make_unique<Digits>(j.value("individual_digits", false));
  }
  if (type == "Metaspace") {
    // Older files say add_prefix_space, newer ones prepend_scheme (always / first / never).
    std::string scheme = j.value("prepend_scheme", "always");
    if (j.contains("add_prefix_space") && !j["add_prefix_space"].get<bool>()) scheme = "never";
    return std::make_unique<Metaspace>(j.value("replacement", "\u2581"), scheme,
                                       j.value("split", true));
  }
  throw Error(fmt::format("tokenizer.json: unsupported pre-tokenizer type '{}'", type));
}

}  // namespace krafla::tok
