// A read-only memory mapping of a whole regular file (what ModelFile and GgufFile parse).
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

 private:
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
};

}  // namespace krafla
