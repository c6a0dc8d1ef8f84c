// Streaming removal of <think>…</think> blocks from a reply (ml_run --think hide).
#include <algorithm>

#include "krafla/chat.h"

namespace krafla {
namespace {

constexpr std::string_view kOpen = "<think>", kClose = "</think>";

// Length of the longest suffix of `s` that is a proper prefix of `tag`: text that must wait for
// the next push before it can be told apart from the tag.
size_t partial_tag(std::string_view s, std::string_view tag) {
  for (size_t n = std::min(s.size(), tag.size() - 1); n > 0; --n)
    if (tag.starts_with(s.substr(s.size() - n))) return n;
  return 0;
}

}  // namespace

std::string ThinkFilter::push(std::string_view text) {
  std::string buf = std::move(held_), out;
  held_.clear();
  buf.append(text);
  std::string_view rest = buf;
  while (!rest.empty()) {
    if (after_close_) {
      const size_t n = std::min(rest.find_first_not_of('\n'), rest.size());
      rest.remove_prefix(n);
      if (rest.empty()) break;
      after_close_ = false;
    }
    const std::string_view tag = in_think_ ? kClose : kOpen;
    const size_t at = rest.find(tag);
    if (at == std::string_view::npos) {
      const size_t keep = partial_tag(rest, tag);
      if (!in_think_) out.append(rest.substr(0, rest.size() - keep));
      held_ = std::string(rest.substr(rest.size() - keep));
      break;
    }
    if (!in_think_) out.append(rest.substr(0, at));
    rest.remove_prefix(at + tag.size());
    after_close_ = in_think_;
    in_think_ = !in_think_;
  }
  return out;
}

std::string ThinkFilter::flush() {
  std::string out = in_think_ ? std::string() : std::move(held_);
  held_.clear();
  return out;
}

bool ThinkFilter::prompt_opens_think(std::string_view prompt) {
  const size_t e = prompt.find_last_not_of(" \t\r\n");
  return e != std::string_view::npos && prompt.substr(0, e + 1).ends_with(kOpen);
}

}  // namespace krafla
