// Decoding. decode() is the stream decoder run over all ids, so the two agree by construction;
// the stream only has to hold back what a later token could still change: an unfinished UTF-8
// sequence, the first bytes of a <0xNN> run (a leading BOM is dropped), leading characters the
// Strip decoder may remove, and a few characters for clean_up_tokenization.
#include <fmt/format.h>

#include "krafla/error.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace krafla {

namespace {

constexpr std::string_view kBom = "\xEF\xBB\xBF";

// The byte of a "<0xNN>" token, or -1.
int byte_token(const std::string& t) {
  if (t.size() != 6 || t.compare(0, 3, "<0x") != 0 || t[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  int hi = hex(t[3]), lo = hex(t[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

// A token's text before any context applies (the first-token strip, byte runs, clean-up).
std::string token_piece(const Tokenizer::Impl& im, int32_t id) {
  const std::string& token = im.vocab.tokens[id];
  std::string piece;
  if (im.decoder.byte_level && !(im.flags[id] & Tokenizer::Impl::kAdded)) {
    for (size_t i = 0; i < token.size();) {
      int b = tok::unicode_to_byte(unicode::next_codepoint(token, i));
      piece += static_cast<char>(b < 0 ? 0 : b);  // the reference maps unknown chars to 0
    }
    return piece;
  }
  piece = token;
  for (const auto& [from, to] : im.decoder.replacements) piece = tok::replace_all(piece, from, to);
  return piece;
}

}  // namespace

std::string Tokenizer::piece(int32_t id) const {
  impl_->check_id(id);
  if (impl_->decoder.byte_fallback)
    if (int b = byte_token(impl_->vocab.tokens[id]); b >= 0) return std::string(1, char(b));
  return token_piece(*impl_, id);
}

Tokenizer::StreamDecoder::StreamDecoder(const Tokenizer& tok, bool skip_special)
    : tok_(&tok), skip_special_(skip_special), strip_left_(tok.impl_->decoder.strip_start) {}

std::string Tokenizer::StreamDecoder::push(int32_t id) {
  const Impl& im = *tok_->impl_;
  im.check_id(id);
  if (skip_special_ && (im.flags[id] & Impl::kSpecial)) return {};
  const tok::DecoderPlan& plan = im.decoder;
  const std::string& token = im.vocab.tokens[id];
  bool first = first_;
  first_ = false;

  if (plan.byte_fallback) {
    if (int b = byte_token(token); b >= 0) {
      if (!in_byte_run_) {
        in_byte_run_ = true;
        run_head_done_ = false;
        run_head_.clear();
      }
      if (run_head_done_) {
        raw_ += static_cast<char>(b);
      } else {
        run_head_ += static_cast<char>(b);
        bool bom_prefix = kBom.starts_with(run_head_);
        if (!bom_prefix || run_head_.size() == kBom.size()) {
          if (!bom_prefix) raw_ += run_head_;
          run_head_done_ = true;
        }
      }
      return take_text();
    }
  }
  if (in_byte_run_ && !run_head_done_) raw_ += run_head_;
  in_byte_run_ = false;

  std::string piece = token_piece(im, id);
  const bool replaced = !(plan.byte_level && !(im.flags[id] & Impl::kAdded));
  if (replaced && plan.strip_first_token && first && !piece.empty() && piece[0] == ' ')
    piece.erase(0, 1);
  if (plan.join_with_space && !first) raw_ += ' ';
  raw_ += piece;
  return take_text();
}

std::string Tokenizer::StreamDecoder::take_text() {
  const Impl& im = *tok_->impl_;
  size_t n = unicode::complete_prefix(raw_);
  std::string text = unicode::repair_utf8(std::string_view(raw_).substr(0, n));
  raw_.erase(0, n);
  size_t cut = 0;
  while (strip_left_ > 0 && cut < text.size()) {
    if (text[cut] != im.decoder.strip_char) {
      strip_left_ = 0;
      break;
    }
    ++cut;
    --strip_left_;
  }
  text.erase(0, cut);
  if (!im.cleanup) return text;
  pending_ += text;
  size_t safe = tok::cleanup_safe_prefix(pending_);
  std::string out = tok::clean_up_tokenization(pending_.substr(0, safe));
  pending_.erase(0, safe);
  return out;
}

std::string Tokenizer::StreamDecoder::flush() {
  if (in_byte_run_ && !run_head_done_) raw_ += run_head_;
  in_byte_run_ = false;
  std::string tail = unicode::repair_utf8(raw_);
  raw_.clear();
  // Route the repaired tail through take_text for stripping and clean-up.
  raw_ = tail;
  std::string out = take_text();
  std::string rest = tok::clean_up_tokenization(std::move(pending_));
  pending_.clear();
  return out + rest;
}

std::string Tokenizer::decode(std::span<const int32_t> ids, bool skip_special) const {
  for (int32_t id : ids) impl_->check_id(id);
  StreamDecoder d(*this, skip_special);
  std::string out;
  for (int32_t id : ids) out += d.push(id);
  return out + d.flush();
}

}  // namespace krafla
