// Fuzz target "request": any bytes as the body of a /v1/chat/completions or /v1/completions
// request. parse_request must return a request or throw ApiError (a 400 naming the field);
// a crash, a sanitizer report or any other exception is a bug. A response_format it accepts is
// compiled into a JSON schema matcher as the server would.
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "krafla/error.h"
#include "server/api_error.h"
#include "server/request.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  krafla::fuzz::FuzzInput in(data, size);
  const auto endpoint =
      in.byte() & 1 ? krafla::server::Endpoint::kCompletion : krafla::server::Endpoint::kChat;
  const std::string body(in.rest());
  try {
    const auto req = krafla::server::parse_request(body, endpoint);
    if (req.format) {
      krafla::JsonMatcher m(*req.format);
      (void)m.accept("{");
    }
  } catch (const krafla::server::ApiError&) {
  }
  return 0;
}
