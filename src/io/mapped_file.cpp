#include "io/mapped_file.h"

#include <fmt/format.h>

#include "krafla/error.h"

#ifdef _WIN32
#include <windows.h>
#else
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#endif

namespace krafla {

#ifdef _WIN32
namespace {

// The system's text for GetLastError(), without its trailing ".\r\n".
std::string last_error_text() {
  const DWORD code = GetLastError();
  char* buf = nullptr;
  const DWORD n = FormatMessageA(
      FORMAT_MESSAGE_ALLOCATE_BUFFER | FORMAT_MESSAGE_FROM_SYSTEM | FORMAT_MESSAGE_IGNORE_INSERTS,
      nullptr, code, 0, reinterpret_cast<char*>(&buf), 0, nullptr);
  std::string s = n && buf ? std::string(buf, n) : fmt::format("error {}", code);
  LocalFree(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r' || s.back() == '.')) s.pop_back();
  return s;
}

// Closes a handle on every way out of the constructor.
struct HandleCloser {
  HANDLE h;
  ~HandleCloser() {
    if (h && h != INVALID_HANDLE_VALUE) CloseHandle(h);
  }
};

}  // namespace

// The path is in the ANSI code page, as argv and std::ifstream have it on Windows. The share
// flags let other processes read and map the same model at the same time.
MappedFile::MappedFile(const std::string& path, const char* what) {
  const DWORD attrs = GetFileAttributesA(path.c_str());
  if (attrs != INVALID_FILE_ATTRIBUTES && (attrs & FILE_ATTRIBUTE_DIRECTORY))
    throw Error(fmt::format("{}: not a regular file", path));
  HandleCloser file{CreateFileA(path.c_str(), GENERIC_READ,
                                FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, nullptr,
                                OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, nullptr)};
  if (file.h == INVALID_HANDLE_VALUE)
    throw Error(fmt::format("{}: cannot open: {}", path, last_error_text()));
  LARGE_INTEGER size{};
  if (GetFileType(file.h) != FILE_TYPE_DISK || !GetFileSizeEx(file.h, &size))
    throw Error(fmt::format("{}: not a regular file", path));
  size_ = static_cast<uint64_t>(size.QuadPart);
  if (size_ == 0) throw Error(fmt::format("{}: file is empty (expected {})", path, what));
  HandleCloser mapping{CreateFileMappingA(file.h, nullptr, PAGE_READONLY, 0, 0, nullptr)};
  if (!mapping.h) throw Error(fmt::format("{}: cannot map: {}", path, last_error_text()));
  void* p = MapViewOfFile(mapping.h, FILE_MAP_READ, 0, 0, 0);
  if (!p) throw Error(fmt::format("{}: cannot map: {}", path, last_error_text()));
  base_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (base_) UnmapViewOfFile(base_);
}

void MappedFile::drop_pages(const uint8_t*, uint64_t) {}

#else

MappedFile::MappedFile(const std::string& path, const char* what) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw Error(fmt::format("{}: not a regular file", path));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  if (size_ == 0) {
    ::close(fd);
    throw Error(fmt::format("{}: file is empty (expected {})", path, what));
  }
  void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error(fmt::format("{}: mmap failed: {}", path, std::strerror(err)));
  base_ = static_cast<const uint8_t*>(p);
}

MappedFile::~MappedFile() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

void MappedFile::drop_pages(const uint8_t* p, uint64_t n) {
  const auto page = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(p) + page - 1) / page * page;
  const uintptr_t end = (reinterpret_cast<uintptr_t>(p) + n) / page * page;
  // MADV_DONTNEED on a private mapping that was never written drops the pages; reading them
  // again faults them in from the file. A failure only leaves them resident.
  if (begin < end) ::madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);
}

#endif

}  // namespace krafla
