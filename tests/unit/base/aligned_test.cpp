#include "base/aligned.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

namespace krafla {

TEST(AlignedBuffer, NormalBuffersAreCacheLineAligned) {
  for (size_t n : {size_t(1), size_t(63), size_t(64), size_t(4096), size_t(3) << 20}) {
    AlignedBuffer b(n);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u) << n;
    EXPECT_EQ(b.size(), n);
    std::memset(b.data(), 1, n);  // writable to the end (ASan checks the bounds)
  }
}

TEST(AlignedBuffer, HugeBuffersStartOnTwoMebibytes) {
  AlignedBuffer small, big;
  small.resize(4096, Pages::Huge);  // below 1 MiB: a normal buffer
  EXPECT_EQ(reinterpret_cast<uintptr_t>(small.data()) % 64, 0u);
  big.resize(size_t(5) << 20, Pages::Huge);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (size_t(2) << 20), 0u);
  std::memset(big.data(), 1, big.size());
  big.resize(100);  // back to a normal buffer: freed with the alignment it was made with
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % 64, 0u);
}

#ifdef __linux__
// Where the kernel offers transparent huge pages on request (THP "always" or "madvise"), a
// written Pages::Huge buffer is backed by them: /proc/self/smaps lists AnonHugePages for its
// mapping.
TEST(AlignedBuffer, HugeBuffersGetTransparentHugePages) {
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string m((std::istreambuf_iterator<char>(mode)), {});
  if (m.find("[never]") != std::string::npos || m.empty())
    GTEST_SKIP() << "transparent huge pages are off here: " << m;
  AlignedBuffer b;
  b.resize(size_t(8) << 20, Pages::Huge);
  std::memset(b.data(), 1, b.size());
  const auto at = reinterpret_cast<uintptr_t>(b.data());
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  size_t huge_kb = 0;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = lo <= at && at < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0)
      huge_kb = std::stoul(line.substr(line.find(':') + 1));
  }
  EXPECT_GE(huge_kb, size_t(2048)) << "the 8 MiB buffer has no huge page";
}
#endif

}  // namespace krafla
