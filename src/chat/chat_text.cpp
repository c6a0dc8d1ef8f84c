#include "chat/chat_text.h"

#include <fmt/format.h>

#include <cstring>

#include "krafla/error.h"

namespace krafla {
namespace {

// Python's str.isspace(): what Jinja's |trim strips in transformers (Python's jinja2), which
// differs from JavaScript's trim() at U+001C–U+001F, U+0085 (Python) and U+FEFF (JavaScript).
bool py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

}  // namespace

std::string trim(const std::string& s) {
  const char* ws = " \t\n\r";
  const size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

std::string strip_chars(const std::string& s, const char* chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  if (left) b = s.find_first_not_of(chars) == std::string::npos ? e : s.find_first_not_of(chars);
  if (right)
    while (e > b && std::strchr(chars, s[e - 1])) --e;
  return s.substr(b, e - b);
}

char32_t utf8_at(std::string_view s, size_t p, size_t& n) {
  const auto b = static_cast<unsigned char>(s[p]);
  n = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
  if (n == 0 || p + n > s.size()) return n = 1, 0xFFFD;
  char32_t c = n == 1 ? b : b & (0x7F >> n);
  for (size_t k = 1; k < n; ++k) {
    const auto x = static_cast<unsigned char>(s[p + k]);
    if ((x & 0xC0) != 0x80) return n = 1, 0xFFFD;
    c = (c << 6) | (x & 0x3F);
  }
  return c;
}

std::string py_strip(const std::string& s) {
  size_t b = 0, e = s.size(), n = 0;
  while (b < e && py_space(utf8_at(s, b, n))) b += n;
  while (e > b) {
    size_t k = e - 1;
    while (k > b && e - k < 4 && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
    if (!py_space(utf8_at(s, k, n)) || k + n != e) break;
    e = k;
  }
  return s.substr(b, e - b);
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
}

bool split_think(const std::string& text, std::string& reasoning, std::string& content) {
  const size_t close = text.rfind("</think>");
  if (close == std::string::npos) return false;
  std::string before = strip_chars(text.substr(0, text.find("</think>")), "\n", false, true);
  if (const size_t open = before.rfind("<think>"); open != std::string::npos)
    before = before.substr(open + 7);
  reasoning = strip_chars(before, "\n", true, false);
  content = strip_chars(text.substr(close + 8), "\n", true, false);
  return true;
}

void check_role(const ChatMessage& m, const char* tmpl, bool tools_ok) {
  if (m.role != "system" && m.role != "user" && m.role != "assistant" &&
      !(tools_ok && m.role == "tool"))
    throw Error(fmt::format("chat template {}: unknown role '{}'", tmpl, m.role));
}

}  // namespace krafla
