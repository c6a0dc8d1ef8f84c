// String helpers shared by the chat templates: the strips and splits their Jinja sources do,
// with Python's definitions where transformers' Jinja (Python's jinja2) differs.
#pragma once
#include <string>
#include <string_view>

#include "krafla/chat.h"

namespace krafla {

// Strips " \t\n\r" at both ends (the fixtures' JavaScript trim() on the texts they use).
std::string trim(const std::string& s);
// Strips the characters of `chars` at the left and/or right end.
std::string strip_chars(const std::string& s, const char* chars, bool left, bool right);
// Python's str.strip(): what Jinja's |trim strips in transformers.
std::string py_strip(const std::string& s);
std::string replace_all(std::string s, const std::string& from, const std::string& to);

// The UTF-8 code point at s[p] (its length in n); a stray byte reads as U+FFFD, length 1.
char32_t utf8_at(std::string_view s, size_t p, size_t& n);

// The reasoning split of the Qwen3 and Qwen3.5 templates: reasoning is the text before the
// first </think> (after the last <think> there), content the text after the last </think>,
// both with the newlines at the seams stripped. False (and nothing set) without a </think>.
bool split_think(const std::string& text, std::string& reasoning, std::string& content);

// Throws krafla::Error naming the template for a role other than system, user, assistant
// (and tool when tools_ok).
void check_role(const ChatMessage& m, const char* tmpl, bool tools_ok = false);

}  // namespace krafla
