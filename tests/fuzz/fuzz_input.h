// A fuzz input read as a sequence of fields, so that one byte string drives a structured call:
// single bytes (choices, flags) and byte strings up to the next separator (0x1F, the ASCII unit
// separator, rare in text and JSON). Reading past the end gives 0 and "" — every input is valid.
// The seed corpora (tests/fuzz/make_seeds.py) are written in this layout.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace krafla::fuzz {

inline constexpr char kSep = '\x1f';

class FuzzInput {
 public:
  FuzzInput(const uint8_t* data, size_t size) : s_(reinterpret_cast<const char*>(data), size) {}

  bool empty() const { return s_.empty(); }
  uint8_t byte() {
    if (s_.empty()) return 0;
    const auto b = static_cast<uint8_t>(s_[0]);
    s_.remove_prefix(1);
    return b;
  }
  // The bytes up to the next separator (which is consumed), or all that is left.
  std::string_view field() {
    const size_t end = s_.find(kSep);
    const std::string_view f = s_.substr(0, end);
    s_.remove_prefix(end == std::string_view::npos ? s_.size() : end + 1);
    return f;
  }
  std::string_view rest() {
    const std::string_view r = s_;
    s_ = {};
    return r;
  }

 private:
  std::string_view s_;
};

// Little-endian int32 values from a byte string (its tail, shorter than 4 bytes, is dropped).
template <class Out>
void read_ids(std::string_view bytes, Out& out) {
  for (size_t i = 0; i + 4 <= bytes.size(); i += 4) {
    int32_t v;
    std::memcpy(&v, bytes.data() + i, 4);
    out.push_back(v);
  }
}

}  // namespace krafla::fuzz
