#include "stop_filter.h"

#include <algorithm>

namespace krafla::cli {

std::string StopFilter::push(std::string_view text) {
  if (hit_) return {};
  held_ += text;
  size_t cut = std::string::npos;
  for (const auto& s : stops_) cut = std::min(cut, held_.find(s));
  if (cut != std::string::npos) {
    hit_ = true;
    std::string out = held_.substr(0, cut);
    held_.clear();
    return out;
  }
  // Nothing matched, so only a proper prefix of a stop string can hide at the end.
  size_t keep = 0;
  for (const auto& s : stops_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (std::string_view(held_).substr(held_.size() - n) == std::string_view(s).substr(0, n)) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopFilter::flush() {
  std::string out;
  if (!hit_) out.swap(held_);
  return out;
}

}  // namespace krafla::cli
