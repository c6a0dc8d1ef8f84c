#include "tokenizer/unicode.h"

#include <algorithm>
#include <vector>

#include "tokenizer/unicode_tables.h"

namespace krafla::unicode {

namespace ut = unicode_tables;

char32_t next_codepoint(std::string_view s, size_t& i) {
  auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) {
    ++i;
    return b0;
  }
  int n = b0 >= 0xF0 ? 3 : b0 >= 0xE0 ? 2 : b0 >= 0xC0 ? 1 : -1;
  if (n < 0 || i + n >= s.size()) {
    ++i;
    return 0xFFFD;
  }
  char32_t cp = b0 & (0x3F >> n);
  for (int k = 1; k <= n; ++k) {
    auto b = static_cast<unsigned char>(s[i + k]);
    if ((b & 0xC0) != 0x80) {
      ++i;
      return 0xFFFD;
    }
    cp = (cp << 6) | (b & 0x3F);
  }
  i += n + 1;
  return cp;
}

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

size_t codepoint_count(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return n;
}

namespace {

bool in_ranges(const ut::CodepointRange* r, size_t n, char32_t cp) {
  auto it = std::upper_bound(r, r + n, cp,
                             [](char32_t c, const ut::CodepointRange& x) { return c < x.first; });
  return it != r && cp <= (it - 1)->last;
}

}  // namespace

bool is_letter(char32_t cp) {
  if (cp < 0x80) return (cp | 0x20) >= 'a' && (cp | 0x20) <= 'z';
  return in_ranges(ut::kLetter, ut::kLetter_size, cp);
}
bool is_number(char32_t cp) {
  if (cp < 0x80) return cp >= '0' && cp <= '9';
  return in_ranges(ut::kNumber, ut::kNumber_size, cp);
}
bool is_mark(char32_t cp) { return cp >= 0x300 && in_ranges(ut::kMark, ut::kMark_size, cp); }

bool is_js_space(char32_t cp) {
  switch (cp) {
    case '\t':
    case '\n':
    case 0x0B:
    case 0x0C:
    case '\r':
    case ' ':
    case 0xA0:
    case 0x1680:
    case 0x2028:
    case 0x2029:
    case 0x202F:
    case 0x205F:
    case 0x3000:
    case 0xFEFF:
      return true;
    default:
      return cp >= 0x2000 && cp <= 0x200A;
  }
}

const char* version() { return ut::kUnicodeVersion; }

// ---- NFC (UAX #15): full canonical decomposition, canonical ordering, canonical composition.

namespace {

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount;
constexpr int kSCount = kLCount * kNCount;

uint8_t combining_class(char32_t cp) {
  if (cp < 0x300) return 0;
  const auto* r = ut::kCombiningClass;
  size_t n = ut::kCombiningClass_size;
  auto it = std::upper_bound(
      r, r + n, cp, [](char32_t c, const ut::CombiningClassRange& x) { return c < x.first; });
  return it != r && cp <= (it - 1)->last ? (it - 1)->ccc : 0;
}

void decompose(char32_t cp, std::vector<char32_t>& out) {
  if (cp >= kSBase && cp < kSBase + kSCount) {
    int s = static_cast<int>(cp - kSBase);
    out.push_back(kLBase + s / kNCount);
    out.push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount) out.push_back(kTBase + s % kTCount);
    return;
  }
  const auto* d = ut::kDecomposition;
  size_t n = ut::kDecomposition_size;
  auto it = std::lower_bound(d, d + n, cp,
                             [](const ut::Decomposition& x, char32_t c) { return x.cp < c; });
  if (it != d + n && it->cp == cp) {
    out.insert(out.end(), ut::kDecompositionData + it->offset,
               ut::kDecompositionData + it->offset + it->length);
  } else {
    out.push_back(cp);
  }
}

char32_t compose_pair(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const auto* c = ut::kComposition;
  size_t n = ut::kComposition_size;
  auto it = std::lower_bound(c, c + n, std::pair{a, b}, [](const ut::Composition& x, auto key) {
    return x.first < key.first || (x.first == key.first && x.second < key.second);
  });
  return it != c + n && it->first == a && it->second == b ? it->composite : 0;
}

}  // namespace

std::string nfc(std::string_view s) {
  // ASCII (and anything below U+0300 that has no decomposition) is already NFC.
  bool simple = std::all_of(s.begin(), s.end(), [](char c) { return (c & 0x80) == 0; });
  if (simple) return std::string(s);

  std::vector<char32_t> cps;
  for (size_t i = 0; i < s.size();) decompose(next_codepoint(s, i), cps);
  // Canonical ordering: stable sort each run of non-starters by combining class.
  for (size_t i = 0; i < cps.size();) {
    if (combining_class(cps[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < cps.size() && combining_class(cps[j]) != 0) ++j;
    std::stable_sort(cps.begin() + i, cps.begin() + j, [](char32_t a, char32_t b) {
      return combining_class(a) < combining_class(b);
    });
    i = j;
  }
  // Canonical composition.
  std::vector<char32_t> out;
  out.reserve(cps.size());
  ptrdiff_t starter = -1;
  int last_ccc = -1;
  for (char32_t cp : cps) {
    int ccc = combining_class(cp);
    if (starter >= 0) {
      bool blocked = last_ccc != -1 && (last_ccc == 0 || last_ccc >= ccc);
      if (!blocked) {
        if (char32_t c = compose_pair(out[starter], cp)) {
          out[starter] = c;
          continue;
        }
      }
    }
    if (ccc == 0) {
      starter = static_cast<ptrdiff_t>(out.size());
      last_ccc = -1;
    } else {
      last_ccc = ccc;
    }
    out.push_back(cp);
  }
  std::string r;
  r.reserve(s.size());
  for (char32_t cp : out) append_utf8(r, cp);
  return r;
}

// ---- WHATWG UTF-8 decoding

namespace {

// Runs the WHATWG decoder; calls emit(begin, end, valid) for each code point's bytes or each
// maximal invalid subpart. Returns the start of an unfinished sequence at the end, or size.
template <typename Emit>
size_t whatwg_scan(std::string_view s, Emit&& emit) {
  size_t i = 0;
  while (i < s.size()) {
    auto b = static_cast<unsigned char>(s[i]);
    int need = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b < 0x80) {
      emit(i, i + 1, true);
      ++i;
      continue;
    } else if (b >= 0xC2 && b <= 0xDF) {
      need = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      need = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      need = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      emit(i, i + 1, false);
      ++i;
      continue;
    }
    size_t j = i + 1;
    int seen = 0;
    while (seen < need && j < s.size()) {
      auto c = static_cast<unsigned char>(s[j]);
      if (c < lo || c > hi) break;
      lo = 0x80;
      hi = 0xBF;
      ++seen;
      ++j;
    }
    if (seen == need) {
      emit(i, j, true);
    } else if (j == s.size()) {
      return i;  // unfinished: more bytes could complete it
    } else {
      emit(i, j, false);
    }
    i = j;
  }
  return s.size();
}

}  // namespace

size_t complete_prefix(std::string_view s) {
  return whatwg_scan(s, [](size_t, size_t, bool) {});
}

std::string repair_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t end = whatwg_scan(s, [&](size_t a, size_t b, bool valid) {
    if (valid) {
      out.append(s.substr(a, b - a));
    } else {
      out += "\xEF\xBF\xBD";
    }
  });
  if (end < s.size()) out += "\xEF\xBF\xBD";
  return out;
}

}  // namespace krafla::unicode
