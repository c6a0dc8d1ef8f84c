// A whole file read into a string (empty when it cannot be read), for the tests and the fuzz
// targets; tests/test_files.h adds the GoogleTest fixtures.
#pragma once
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace krafla::test {

inline std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace krafla::test
