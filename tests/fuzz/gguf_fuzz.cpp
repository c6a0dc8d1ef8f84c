// libFuzzer target: any bytes as a model file (GGUF or .mlb, by magic). Opening must either
// succeed or throw krafla::Error; a crash, a sanitizer report or any other exception is a bug.
// Build: cmake -DKRAFLA_FUZZ=ON with clang (tests/fuzz/CMakeLists.txt); run:
//   build/fuzz/tests/fuzz/gguf_fuzz -max_total_time=60 CORPUS_DIR
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "io/model_file.h"
#include "krafla/error.h"
#include "krafla/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("krafla-fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size && ::write(fd, data, size) != ssize_t(size)) {
    ::close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    krafla::ModelFile f(path);
    if (f.kind() == "tokenizer" || f.kind() == "model") (void)krafla::load_tokenizer(path);
  } catch (const krafla::Error&) {
  }
  ::close(fd);
  return 0;
}
