// Cuts generated text at the first stop string. Text arrives in pieces (one per token), and a
// stop string can straddle pieces, so the filter holds back the longest tail that could still
// become a stop string and releases it only once it cannot: a client never sees text that a
// later piece turns into part of a stop string.
#pragma once
#include <string>
#include <string_view>
#include <vector>

namespace krafla::cli {

class StopFilter {
 public:
  explicit StopFilter(std::vector<std::string> stops) : stops_(std::move(stops)) {}

  // Returns the text that is safe to emit. Valid UTF-8 in gives valid UTF-8 out: a held tail
  // starts where a stop string starts, which is a character boundary.
  std::string push(std::string_view text);
  // The held tail, when generation ended without a stop string.
  std::string flush();
  bool hit() const { return hit_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool hit_ = false;
};

}  // namespace krafla::cli
