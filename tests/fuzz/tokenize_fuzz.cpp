// Fuzz target "tokenize": the real tokenizers of ../shared/data (.models/tokenizers: Llama 2's
// BPE with byte fallback, the byte-level BPEs of Llama 3, Qwen3 and Qwen3.5, Gemma 3's with its
// normalizer) on arbitrary bytes. Fields: which tokenizer | flags | text | ids (int32 LE).
// encode never throws on any bytes (invalid UTF-8 included); decode and the stream decoder take
// the encoded ids, and the raw ids throw krafla::Error only when one is outside the vocabulary.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "krafla/error.h"
#include "krafla/tokenizer.h"
#include "tests/read_file.h"

namespace {

using krafla::test::read_file;

const std::vector<krafla::Tokenizer>& tokenizers() {
  static const auto all = [] {
    std::vector<krafla::Tokenizer> v;
    for (const char* name : {"llama2", "llama3", "qwen3", "qwen3_5", "gemma3"}) {
      const std::string dir = std::string(KRAFLA_SOURCE_DIR) + "/.models/tokenizers/" + name;
      const std::string json = read_file(dir + "/tokenizer.json");
      if (json.empty()) {
        std::fprintf(stderr,
                     "tokenize_fuzz: %s/tokenizer.json is missing: scripts/fetch_tokenizers.sh\n",
                     dir.c_str());
        std::abort();
      }
      v.push_back(krafla::Tokenizer::from_json(json, read_file(dir + "/tokenizer_config.json")));
    }
    return v;
  }();
  return all;
}

}  // namespace

// Loading the five tokenizers takes seconds under ASan: before the first input, so that it does
// not count against libFuzzer's per-input timeout.
extern "C" int LLVMFuzzerInitialize(int*, char***) {
  (void)tokenizers();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  krafla::fuzz::FuzzInput in(data, size);
  const auto& tok = tokenizers()[in.byte() % tokenizers().size()];
  const uint8_t flags = in.byte();
  const std::string_view text = in.field();
  std::vector<int32_t> raw;
  krafla::fuzz::read_ids(in.rest(), raw);

  const auto ids = tok.encode(text, flags & 1, flags & 2);
  for (int32_t id : ids)
    if (id < 0 || id >= tok.vocab_size()) std::abort();  // encode made an id it cannot decode
  (void)tok.decode(ids, flags & 4);
  krafla::Tokenizer::StreamDecoder stream(tok, flags & 4);
  for (int32_t id : ids) (void)stream.push(id);
  (void)stream.flush();

  bool in_range = true;
  for (int32_t id : raw) in_range = in_range && id >= 0 && id < tok.vocab_size();
  try {
    (void)tok.decode(raw, flags & 8);
    if (!in_range) std::abort();  // an id outside the vocabulary was decoded
  } catch (const krafla::Error&) {
    if (in_range) std::abort();  // a valid id was refused
  }
  if (in_range) {
    krafla::Tokenizer::StreamDecoder s2(tok, flags & 8);
    for (int32_t id : raw) {
      (void)s2.push(id);
      (void)tok.piece(id);
    }
    (void)s2.flush();
  }
  return 0;
}
