// The error a request gets back: an HTTP status plus the fields of OpenAI's error object
// ({"error": {"message", "type", "param", "code"}}), which the official SDKs turn into typed
// exceptions (BadRequestError, AuthenticationError, NotFoundError, …) by status.
#pragma once
#include <stdexcept>
#include <string>

namespace krafla::server {

class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message, std::string type, std::string param = "",
           std::string code = "")
      : std::runtime_error(message),
        status(status),
        type(std::move(type)),
        param(std::move(param)),
        code(std::move(code)) {}

  // 400 invalid_request_error: the request itself is wrong (type, value, unsupported option).
  static ApiError invalid(const std::string& message, std::string param = "",
                          std::string code = "") {
    return ApiError(400, message, "invalid_request_error", std::move(param), std::move(code));
  }

  int status;
  std::string type;   // invalid_request_error, authentication_error, server_error
  std::string param;  // the offending request field, "" for none (null in JSON)
  std::string code;   // machine-readable: invalid_type, model_not_found, … ("" → null)
};

}  // namespace krafla::server
