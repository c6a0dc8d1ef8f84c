#include "tokenizer/split_patterns.h"

#include <fmt/format.h>

#include "krafla/error.h"
#include "tokenizer/unicode.h"

namespace krafla::tok {

namespace {

// The text as code points, with the byte offset of each (plus one past the end).
struct Codepoints {
  std::vector<char32_t> cp;
  std::vector<size_t> at;
  explicit Codepoints(std::string_view s) {
    cp.reserve(s.size());
    at.reserve(s.size() + 1);
    for (size_t i = 0; i < s.size();) {
      at.push_back(i);
      cp.push_back(unicode::next_codepoint(s, i));
    }
    at.push_back(s.size());
  }
  size_t size() const { return cp.size(); }
};

bool is_rn(char32_t c) { return c == '\r' || c == '\n'; }
char32_t ascii_lower(char32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// Length (in code points) of a contraction 's 't 're 've 'm 'll 'd at p, or 0.
size_t contraction(const Codepoints& t, size_t p, bool ignore_case) {
  if (t.cp[p] != '\'' || p + 1 >= t.size()) return 0;
  auto at = [&](size_t k) -> char32_t {
    if (p + k >= t.size()) return 0;
    return ignore_case ? ascii_lower(t.cp[p + k]) : t.cp[p + k];
  };
  char32_t a = at(1), b = at(2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// End of the run of code points satisfying pred from p.
template <typename Pred>
size_t run_end(const Codepoints& t, size_t p, Pred pred) {
  while (p < t.size() && pred(t.cp[p])) ++p;
  return p;
}

// \s+(?!\S) then \s+ : a whitespace run, minus its last character when a non-space follows.
size_t whitespace_tail(const Codepoints& t, size_t p) {
  size_t e = run_end(t, p, unicode::is_js_space);
  if (e == p) return p;
  if (e == t.size() || e - 1 == p) return e;  // at the end, or \s+ fallback for one char
  return e - 1;
}

// A pattern whose alternatives cover every character: find-all is a scan that takes the
// match at each position in turn.
class ScanPattern : public SplitPattern {
 public:
  std::vector<Span> find_all(std::string_view text) const override {
    Codepoints t(text);
    std::vector<Span> out;
    for (size_t p = 0; p < t.size();) {
      size_t e = match_at(t, p);
      if (e == p) e = p + 1;  // cannot happen: every character is in some class
      out.emplace_back(t.at[p], t.at[e]);
      p = e;
    }
    return out;
  }

 protected:
  virtual size_t match_at(const Codepoints& t, size_t p) const = 0;  // end of the match at p
};

// Llama 3 / Qwen2 family:
//   (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,D}
//   | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
// With marks_with_letters (Qwen3.5), letters are [\p{L}\p{M}] and marks leave the "other" class.
class Llama3Pattern final : public ScanPattern {
 public:
  Llama3Pattern(size_t max_digits, bool marks_with_letters)
      : max_digits_(max_digits), marks_(marks_with_letters) {}

 private:
  bool letter(char32_t c) const { return unicode::is_letter(c) || (marks_ && unicode::is_mark(c)); }
  bool other(char32_t c) const {
    return !unicode::is_js_space(c) && !letter(c) && !unicode::is_number(c);
  }

  size_t match_at(const Codepoints& t, size_t p) const override {
    if (size_t n = contraction(t, p, true)) return p + n;
    auto is_letter = [&](char32_t c) { return letter(c); };
    char32_t c = t.cp[p];
    if (letter(c)) return run_end(t, p, is_letter);
    if (!is_rn(c) && !unicode::is_number(c) && p + 1 < t.size() && letter(t.cp[p + 1]))
      return run_end(t, p + 1, is_letter);
    if (unicode::is_number(c)) {
      size_t e = p;
      while (e < t.size() && e - p < max_digits_ && unicode::is_number(t.cp[e])) ++e;
      return e;
    }
    size_t q = c == ' ' && p + 1 < t.size() && other(t.cp[p + 1]) ? p + 1 : p;
    if (other(t.cp[q])) {
      size_t e = run_end(t, q, [&](char32_t x) { return other(x); });
      return run_end(t, e, is_rn);
    }
    // \s*[\r\n]+ : up to and including the last newline of the whitespace run.
    size_t ws = run_end(t, p, unicode::is_js_space);
    for (size_t k = ws; k > p; --k)
      if (is_rn(t.cp[k - 1])) return k;
    return whitespace_tail(t, p);
  }

  size_t max_digits_;
  bool marks_;
};

// GPT-2: 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
class Gpt2Pattern final : public ScanPattern {
 private:
  static bool other(char32_t c) {
    return !unicode::is_js_space(c) && !unicode::is_letter(c) && !unicode::is_number(c);
  }
  size_t match_at(const Codepoints& t, size_t p) const override {
    if (size_t n = contraction(t, p, false)) return p + n;
    for (auto cls : {+[](char32_t c) { return unicode::is_letter(c); },
                     +[](char32_t c) { return unicode::is_number(c); }, +other}) {
      size_t q = t.cp[p] == ' ' && p + 1 < t.size() && cls(t.cp[p + 1]) ? p + 1 : p;
      if (cls(t.cp[q])) return run_end(t, q, cls);
    }
    return whitespace_tail(t, p);
  }
};

class LiteralPattern final : public SplitPattern {
 public:
  explicit LiteralPattern(std::string needle) : needle_(std::move(needle)) {}
  std::vector<Span> find_all(std::string_view text) const override {
    std::vector<Span> out;
    if (needle_.empty()) return out;
    for (size_t p = text.find(needle_); p != std::string_view::npos;
         p = text.find(needle_, p + needle_.size()))
      out.emplace_back(p, p + needle_.size());
    return out;
  }

 private:
  std::string needle_;
};

constexpr std::string_view kLlama3 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen3.5 keeps combining marks with the letters they modify.
constexpr std::string_view kQwen35 =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

}  // namespace

std::unique_ptr<SplitPattern> SplitPattern::from_regex(std::string_view regex_in) {
  // Some converters spell the case-insensitive group out for engines without (?i:...).
  std::string regex(regex_in);
  constexpr std::string_view kSpelled = "(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])";
  if (regex.starts_with(kSpelled))
    regex.replace(0, kSpelled.size(), "(?i:'s|'t|'re|'ve|'m|'ll|'d)");
  if (regex == kLlama3) return std::make_unique<Llama3Pattern>(3, false);
  if (regex == kQwen2) return std::make_unique<Llama3Pattern>(1, false);
  if (regex == kQwen35) return std::make_unique<Llama3Pattern>(1, true);
  if (regex == kGpt2) return gpt2();
  throw Error(fmt::format("tokenizer.json: unsupported pre-tokenizer Split regex '{}'", regex_in));
}

std::unique_ptr<SplitPattern> SplitPattern::literal(std::string needle) {
  return std::make_unique<LiteralPattern>(std::move(needle));
}

std::unique_ptr<SplitPattern> SplitPattern::gpt2() { return std::make_unique<Gpt2Pattern>(); }

}  // namespace krafla::tok
