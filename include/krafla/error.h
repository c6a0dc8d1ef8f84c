// The one exception type of the library. Messages name the file, field, tensor or offset
// that is wrong, in one line; executables catch it at main and exit 2.
#pragma once
#include <stdexcept>
#include <string>

namespace krafla {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace krafla
