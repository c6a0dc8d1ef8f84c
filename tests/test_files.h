// Files for the GoogleTest suites: a whole file read into a string, and a fixture with a
// temporary file per test and the error a reader throws for given bytes.
#pragma once
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "krafla/error.h"
#include "tests/read_file.h"

namespace krafla::test {

class TempFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::path(::testing::TempDir()) /
             ("krafla_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
  }
  void TearDown() override { std::filesystem::remove(path_); }

  void write(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  }
  // The krafla::Error that open(path) throws for a file of `bytes`, without the "path: "
  // prefix it must start with.
  template <class Open>
  std::string error_opening(const std::string& bytes, Open open) {
    write(bytes);
    try {
      open(path_);
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind(path_ + ": ", 0), 0u) << what;  // names the file first
      return what.substr(std::min(what.size(), path_.size() + 2));
    }
    ADD_FAILURE() << "the file was accepted";
    return "";
  }

  std::string path_;
};

}  // namespace krafla::test
