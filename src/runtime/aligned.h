// A 64-byte aligned, uninitialised buffer (weights, activations): cache-line and AVX-512 aligned.
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>

namespace krafla {

struct AlignedFree {
  void operator()(void* p) const { std::free(p); }
};

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { resize(bytes); }
  void resize(size_t bytes) {
    size_ = bytes;
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    if (rounded && !p) throw std::bad_alloc();
    ptr_.reset(p);
  }
  template <typename T = uint8_t>
  T* data() const {
    return static_cast<T*>(ptr_.get());
  }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<void, AlignedFree> ptr_;
  size_t size_ = 0;
};

}  // namespace krafla
