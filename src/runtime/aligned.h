// A 64-byte aligned, uninitialised buffer (weights, activations): cache-line and AVX-512 aligned.
#pragma once
#include <cstdint>
#include <memory>
#include <new>

namespace krafla {

// C++17's aligned operator new, not std::aligned_alloc: MinGW's C runtime (msvcrt) has no
// aligned_alloc, and a pointer from its _aligned_malloc must not reach free().
constexpr std::align_val_t kBufferAlign{64};

struct AlignedFree {
  void operator()(void* p) const { ::operator delete(p, kBufferAlign); }
};

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { resize(bytes); }
  void resize(size_t bytes) {
    size_ = bytes;
    const size_t rounded = (bytes + 63) / 64 * 64;
    ptr_.reset(rounded ? ::operator new(rounded, kBufferAlign) : nullptr);  // throws bad_alloc
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
