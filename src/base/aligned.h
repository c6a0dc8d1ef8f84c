// A 64-byte aligned, uninitialised buffer (weights, activations): cache-line and AVX-512 aligned.
#pragma once
#include <cstdint>
#include <memory>
#include <new>
#ifdef __linux__
#include <sys/mman.h>
#endif

namespace krafla {

// C++17's aligned operator new, not std::aligned_alloc: MinGW's C runtime (msvcrt) has no
// aligned_alloc, and a pointer from its _aligned_malloc must not reach free().
constexpr std::align_val_t kBufferAlign{64};

// What resize(bytes, Pages::Huge) aligns a buffer of at least 1 MiB to: the 2 MiB of a
// transparent huge page.
constexpr std::align_val_t kHugeAlign{size_t(2) << 20};

struct AlignedFree {
  std::align_val_t align = kBufferAlign;
  void operator()(void* p) const { ::operator delete(p, align); }
};

// Pages::Huge: a buffer written whole soon after it is made and then streamed (packed
// weights) starts on a 2 MiB boundary and asks Linux for transparent huge pages
// (MADV_HUGEPAGE, for THP's "madvise" mode): 512 times fewer page faults while it is written
// (loading a 1B model: 3.3 -> 1.5 s here) and fewer TLB misses when it is streamed. Also for
// a buffer filled front to back a little at a time (KvCache's chunked layout): resident in
// 2 MiB steps as it fills. Not for one touched here and there: all of it would become resident.
enum class Pages { Normal, Huge };

class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(size_t bytes) { resize(bytes); }
  void resize(size_t bytes, Pages pages = Pages::Normal) {
    size_ = bytes;
    const size_t rounded = (bytes + 63) / 64 * 64;
    const bool huge = pages == Pages::Huge && rounded >= (size_t(1) << 20);
    const std::align_val_t align = huge ? kHugeAlign : kBufferAlign;
    ptr_.reset();
    ptr_ = std::unique_ptr<void, AlignedFree>(rounded ? ::operator new(rounded, align) : nullptr,
                                              AlignedFree{align});  // throws bad_alloc
#ifdef __linux__
    if (huge) ::madvise(ptr_.get(), rounded, MADV_HUGEPAGE);  // a hint: failing changes nothing
#endif
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
