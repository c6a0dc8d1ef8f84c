#include "io/mapped_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "krafla/error.h"

namespace krafla {

MappedFile::MappedFile(const std::string& path, const char* what) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd_);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd_);
    throw Error(fmt::format("{}: file is empty (expected {})", path, what));
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd_, 0);
  if (p == MAP_FAILED) {
    ::close(fd_);
    throw Error(fmt::format("{}: mmap failed: {}", path, std::strerror(errno)));
  }
  base_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
  if (fd_ >= 0) ::close(fd_);
}

}  // namespace krafla
