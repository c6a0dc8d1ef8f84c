// Fuzz target "model": any bytes as a model file (.mlb, .mlt or GGUF, by magic). Opening it,
// reading its tokenizer and loading its weights must either succeed or throw krafla::Error;
// a crash, a sanitizer report, a hang or any other exception is a bug. A model that loads runs
// one forward step on a token, so that shapes the loader accepted are shapes the forward takes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "io/model_file.h"
#include "krafla/error.h"
#include "krafla/model.h"
#include "krafla/session.h"
#include "model/gguf_import.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const int fd = memfd_create("krafla-fuzz", MFD_CLOEXEC);
  if (fd < 0) return 0;
  if (size && ::write(fd, data, size) != ssize_t(size)) {
    ::close(fd);
    return 0;
  }
  const std::string path = "/proc/self/fd/" + std::to_string(fd);
  try {
    krafla::ModelFile f(path, krafla::import_gguf);
    if (f.kind() == "tokenizer" || f.kind() == "model") (void)krafla::load_tokenizer(path);
    if (f.kind() == "model") {
      auto model = krafla::Model::load(path, 1);
      krafla::SessionOptions opts;
      opts.n_threads = 1;
      opts.n_ctx = 8;
      krafla::Session session(*model, opts);
      const int32_t tok = 0;
      session.eval({&tok, 1});
    }
  } catch (const krafla::Error&) {
  }
  ::close(fd);
  return 0;
}
