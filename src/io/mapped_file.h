// A read-only memory mapping of a whole regular file (what ModelFile, GgufFile and PackCache
// parse). The one platform file of the loader: mmap on POSIX, CreateFileMapping/MapViewOfFile
// on Windows; the rest of the library only sees data() and size().
#pragma once
#include <cstdint>
#include <string>

namespace krafla {

class MappedFile {
 public:
  // Throws krafla::Error naming the path when it cannot be opened, is not a regular file, is
  // empty (`what` says what was expected there) or cannot be mapped.
  MappedFile(const std::string& path, const char* what);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return base_; }
  uint64_t size() const { return size_; }

  // Takes the pages wholly inside [p, p + n) of a read-only mapping out of the process's
  // resident set (the system keeps them in its file cache; a later read maps them again, so
  // the bytes stay valid). The loader calls it for each matrix once its packed copy is made,
  // so that loading holds one copy of the weights, not two. A no-op on Windows.
  static void drop_pages(const uint8_t* p, uint64_t n);

 private:
  // The mapping outlives the file descriptor or handle it was made from (closed once mapped).
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace krafla
