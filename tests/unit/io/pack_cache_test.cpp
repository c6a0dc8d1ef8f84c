#include "io/pack_cache.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/model_file.h"
#include "krafla/error.h"

namespace krafla {
namespace {

namespace fs = std::filesystem;

// A fresh directory under the test temp dir, removed with the fixture.
class PackCacheDir : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::path(::testing::TempDir()) /
            ("krafla_pack_cache_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    model_path_ = (root_ / "m.mlb").string();
    write_minimal_mlb(model_path_);
  }
  void TearDown() override { fs::remove_all(root_); }

  // The smallest valid .mlb (docs/format.md): header, metadata JSON, no tensors.
  static void write_minimal_mlb(const std::string& path) {
    const std::string json = R"({"format":"krafla-mlb","kind":"model","tensors":[]})";
    std::ofstream out(path, std::ios::binary);
    const uint32_t version = 1, flags = 0;
    const uint64_t size = json.size();
    out.write(kMlbMagic, 8);
    out.write(reinterpret_cast<const char*>(&version), 4);
    out.write(reinterpret_cast<const char*>(&flags), 4);
    out.write(reinterpret_cast<const char*>(&size), 8);
    out << json;
  }

  // Writes a one-matrix cache to `path`; what PackCache::write throws passes through.
  void write_cache(const std::string& path) {
    ModelFile model(model_path_);
    const std::vector<uint8_t> bytes = packed();
    const std::vector<PackEntry> entries = {{"w", 0, 2, 32, bytes.size()}};
    PackCache::write(path, model, entries, {bytes.data()});
  }
  static std::vector<uint8_t> packed() {
    std::vector<uint8_t> b(100);
    for (size_t i = 0; i < b.size(); ++i) b[i] = uint8_t(i * 7 + 1);
    return b;
  }

  fs::path root_;
  std::string model_path_;
};

// --pack-cache /nonexistent/dir used to create the whole path silently. Only the last level is
// created now; a missing parent is an Error naming both, and nothing is left behind.
TEST_F(PackCacheDir, MissingParentIsRefusedAndNothingIsCreated) {
  const fs::path dir = root_ / "missing" / "cache";
  try {
    write_cache(PackCache::path_for(dir.string(), model_path_));
    FAIL() << "wrote a cache below a missing parent";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir.string()), std::string::npos) << what;
    EXPECT_NE(what.find((root_ / "missing").string() + " does not exist"), std::string::npos)
        << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;  // load_note() shows one line
  }
  EXPECT_FALSE(fs::exists(root_ / "missing"));
}

TEST_F(PackCacheDir, ParentThatIsAFileIsRefused) {
  std::ofstream(root_ / "file").put('x');
  const fs::path dir = root_ / "file" / "cache";
  try {
    write_cache(PackCache::path_for(dir.string(), model_path_));
    FAIL() << "wrote a cache below a regular file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is not a directory"), std::string::npos) << e.what();
  }
}

// The last level is created, and the cache written there maps back with the same bytes.
TEST_F(PackCacheDir, LastLevelIsCreatedAndTheCacheMaps) {
  const fs::path dir = root_ / "cache";
  const std::string path = PackCache::path_for(dir.string(), model_path_);
  write_cache(path);
  ASSERT_TRUE(fs::is_directory(dir));
  write_cache(path);  // an existing directory is fine
  ModelFile model(model_path_);
  const std::vector<uint8_t> bytes = packed();
  std::string why;
  const auto cache = PackCache::open(path, model, {{"w", 0, 2, 32, bytes.size()}}, &why);
  ASSERT_TRUE(cache) << why;
  EXPECT_EQ(std::memcmp(cache->data(0), bytes.data(), bytes.size()), 0);
}

}  // namespace
}  // namespace krafla
