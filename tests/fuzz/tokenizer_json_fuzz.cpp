// Fuzz target "tokenizer_json": fields tokenizer.json | tokenizer_config.json | text. Parsing
// must succeed or throw krafla::Error; a tokenizer that parses encodes the text (special tokens
// parsed and not), decodes what it made, decodes every id of the vocabulary's edges and streams
// them, without a crash.
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "krafla/error.h"
#include "krafla/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  krafla::fuzz::FuzzInput in(data, size);
  const std::string_view json = in.field();
  const std::string_view config = in.field();
  const std::string_view text = in.rest();
  try {
    const auto tok = krafla::Tokenizer::from_json(json, config);
    for (bool parse_special : {true, false}) {
      const auto ids = tok.encode(text, true, parse_special);
      (void)tok.decode(ids);
      (void)tok.decode(ids, true);
    }
    std::vector<int32_t> edges;
    for (int32_t id : {0, 1, tok.vocab_size() - 1, tok.bos_id(), tok.eos_id()})
      if (id >= 0 && id < tok.vocab_size()) edges.push_back(id);
    krafla::Tokenizer::StreamDecoder stream(tok);
    for (int32_t id : edges) {
      (void)tok.piece(id);
      (void)tok.token_text(id);
      (void)stream.push(id);
    }
    (void)stream.flush();
  } catch (const krafla::Error&) {
  }
  return 0;
}
