// UTF-8 helpers and the Unicode properties the tokenizer needs (categories for the pre-tokenizer
// patterns, NFC for normalizers, WHATWG-style repair of invalid UTF-8 for decoding).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>

namespace krafla::unicode {

// Decodes the code point at s[i]; advances i. Invalid bytes decode as U+FFFD, one byte each
// (inputs to encode() are expected to be valid; this only keeps the scanner moving).
char32_t next_codepoint(std::string_view s, size_t& i);
void append_utf8(std::string& out, char32_t cp);
size_t codepoint_count(std::string_view s);

bool is_letter(char32_t cp);  // \p{L}
bool is_number(char32_t cp);  // \p{N}
bool is_mark(char32_t cp);    // \p{M}
// JavaScript's \s and String.prototype.trim set (the reference encoder is JS). It differs from
// Rust regex's \s (Unicode White_Space): JS includes U+FEFF and excludes U+0085.
bool is_js_space(char32_t cp);
const char* version();

std::string nfc(std::string_view s);

// Length of the longest prefix of s that is valid UTF-8 or an invalid-but-finished sequence:
// an incomplete sequence at the very end (which more bytes could complete) is left out.
size_t complete_prefix(std::string_view s);
// Replaces invalid sequences by U+FFFD the way the WHATWG TextDecoder does (one U+FFFD per
// maximal subpart), which is what the JS reference's decoders produce.
std::string repair_utf8(std::string_view s);

}  // namespace krafla::unicode
