#include "tokenizer/normalizer.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <vector>

#include "krafla/error.h"
#include "tokenizer/json_reader.h"
#include "tokenizer/unicode.h"

namespace krafla::tok {

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  if (from.empty()) return std::string(text);
  std::string out;
  out.reserve(text.size());
  size_t p = 0;
  for (size_t q = text.find(from); q != std::string_view::npos; q = text.find(from, p)) {
    out.append(text.substr(p, q - p));
    out.append(to);
    p = q + from.size();
  }
  out.append(text.substr(p));
  return out;
}

std::string_view trim_start(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t j = i;
    if (!unicode::is_js_space(unicode::next_codepoint(s, j))) break;
    i = j;
  }
  return s.substr(i);
}

std::string_view trim_end(std::string_view s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    size_t j = start;
    if (!unicode::is_js_space(unicode::next_codepoint(s, j))) break;
    end = start;
  }
  return s.substr(0, end);
}

std::string literal_pattern(const nlohmann::json& pattern, std::string_view where) {
  if (pattern.contains("String")) return pattern["String"].get<std::string>();
  throw Error(fmt::format("tokenizer.json: {} pattern {} is not supported (only String)", where,
                          pattern.dump()));
}

namespace {

class Sequence final : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> items) : items_(std::move(items)) {}
  std::string normalize(std::string text) const override {
    for (const auto& n : items_) text = n->normalize(std::move(text));
    return text;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> items_;
};

class Replace final : public Normalizer {
 public:
  Replace(std::string from, std::string to) : from_(std::move(from)), to_(std::move(to)) {}
  std::string normalize(std::string text) const override { return replace_all(text, from_, to_); }

 private:
  std::string from_, to_;
};

// The JS reference prepends unconditionally, but it never normalizes an empty section, which
// is the only case where Hugging Face's Prepend (which skips empty input) would differ.
class Prepend final : public Normalizer {
 public:
  explicit Prepend(std::string prefix) : prefix_(std::move(prefix)) {}
  std::string normalize(std::string text) const override { return prefix_ + text; }

 private:
  std::string prefix_;
};

class Nfc final : public Normalizer {
 public:
  std::string normalize(std::string text) const override { return unicode::nfc(text); }
};

class Strip final : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  std::string normalize(std::string text) const override {
    std::string_view v = text;
    if (left_) v = trim_start(v);
    if (right_) v = trim_end(v);
    return std::string(v);
  }

 private:
  bool left_, right_;
};

}  // namespace

std::unique_ptr<Normalizer> Normalizer::from_json(const nlohmann::json& j) {
  if (j.is_null()) return nullptr;
  std::string type = j.value("type", "");
  if (type == "Sequence")
    return std::make_unique<Sequence>(sequence_steps<Normalizer>(j.at("normalizers")));
  if (type == "Replace")
    return std::make_unique<Replace>(literal_pattern(j.at("pattern"), "Replace normalizer"),
                                     j.at("content").get<std::string>());
  if (type == "Prepend") return std::make_unique<Prepend>(j.at("prepend").get<std::string>());
  if (type == "NFC") return std::make_unique<Nfc>();
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("strip_left", false), j.value("strip_right", false));
  throw Error(fmt::format("tokenizer.json: unsupported normalizer type '{}'", type));
}

}  // namespace krafla::tok
