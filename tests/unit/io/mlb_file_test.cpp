// The .mlb/.mlt reader (docs/format.md): a valid file's table and data, and every check that
// refuses a broken one, by the message that names what is wrong.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "io/model_file.h"
#include "krafla/error.h"
#include "model/gguf_import.h"
#include "tests/test_files.h"

namespace krafla {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The parts of a file, each open to corruption by a test.
struct Parts {
  std::string magic{kMlbMagic, 8};
  uint32_t version = kMlbVersion;
  uint32_t flags = 0;
  json meta = {{"format", "krafla-mlb"}, {"kind", "model"}, {"tensors", json::array()}};
  std::string data;                // written at data_offset
  int64_t json_size_delta = 0;     // added to the JSON size field
  std::string json_text_override;  // replaces meta.dump() when set
};

std::string bytes_of(const Parts& p) {
  const std::string text = p.json_text_override.empty() ? p.meta.dump() : p.json_text_override;
  std::string out = p.magic;
  const uint64_t json_size = text.size() + p.json_size_delta;
  out.append(reinterpret_cast<const char*>(&p.version), 4);
  out.append(reinterpret_cast<const char*>(&p.flags), 4);
  out.append(reinterpret_cast<const char*>(&json_size), 8);
  out += text;
  out.resize((out.size() + 63) / 64 * 64, '\0');
  return out + p.data;
}

class ModelFileTest : public test::TempFileTest {
 protected:
  // The message ModelFile(path) throws for `bytes`, without the "path: " prefix.
  std::string error_for(const std::string& bytes) {
    return error_opening(bytes, [](const std::string& p) { ModelFile f(p, import_gguf); });
  }
  // A file with one tensor entry `t` and `data` after the header.
  std::string error_for_tensor(json t, std::string data = std::string(64, '\0')) {
    Parts p;
    p.meta["tensors"].push_back(std::move(t));
    p.data = std::move(data);
    return error_for(bytes_of(p));
  }
};

json tensor(const char* name, const char* dtype, json shape, uint64_t offset, uint64_t size) {
  return {{"name", name}, {"dtype", dtype}, {"shape", shape}, {"offset", offset}, {"size", size}};
}

TEST_F(ModelFileTest, ReadsTheTableAndMapsTheData) {
  Parts p;
  p.meta["tensors"] = {tensor("w", "f32", {2, 3}, 0, 24),
                       tensor("tokenizer.json", "bytes", {5}, 64, 5),
                       tensor("q", "q8_0", {1, 32}, 128, 34)};
  std::string data(128 + 34, '\0');
  const float w[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(data.data(), w, sizeof w);
  std::memcpy(data.data() + 64, "hello", 5);
  p.data = data;
  write(bytes_of(p));
  const ModelFile f(path_);
  EXPECT_EQ(f.kind(), "model");
  EXPECT_EQ(f.version(), kMlbVersion);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.data_offset(), (24 + p.meta.dump().size() + 63) / 64 * 64);
  ASSERT_EQ(f.tensors().size(), 3u);
  const TensorView& t = f.get("w", {2, 3});
  EXPECT_EQ(t.dtype, DType::F32);
  EXPECT_EQ(t.rows(), 2);
  EXPECT_EQ(t.cols(), 3);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t.data) % 64, 0u);
  EXPECT_EQ(reinterpret_cast<const float*>(t.data)[5], 6.0f);
  EXPECT_EQ(f.bytes("tokenizer.json"), "hello");
  EXPECT_EQ(f.find("q")->offset, 128u);
  EXPECT_EQ(f.find("absent"), nullptr);
  EXPECT_STREQ(dtype_name(f.find("q")->dtype), "q8_0");
}

#ifdef __linux__
// The process's resident pages that map files (/proc/self/status RssFile), in KiB.
long rss_file_kib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("RssFile:", 0) == 0) return std::stol(line.substr(8));
  return -1;
}

// What the loader does once a matrix is packed: the file's pages leave the resident set, and
// its bytes still read back the same (from the file again).
TEST_F(ModelFileTest, DropPagesTakesMappedPagesOutOfMemoryAndKeepsTheBytes) {
  const int64_t n = 8 << 20;  // 32 MiB of f32
  Parts p;
  // (json::array: a one-element brace list is the element itself to clang, an array to g++)
  p.meta["tensors"] = json::array({tensor("w", "f32", {n / 1024, 1024}, 0, uint64_t(n) * 4)});
  std::vector<float> w(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) w[size_t(i)] = float(i % 1000003);
  p.data.assign(reinterpret_cast<const char*>(w.data()), w.size() * 4);
  write(bytes_of(p));
  ModelFile f(path_);
  const TensorView& t = f.get("w", {n / 1024, 1024});
  ASSERT_EQ(std::memcmp(t.data, w.data(), w.size() * 4), 0);  // every page read: resident
  const long before = rss_file_kib();
  f.drop_pages(t.data, uint64_t(n) * 4);
  EXPECT_FALSE(f.release(t.data));  // mapped, not a copy: the view stays
  const long after = rss_file_kib();
  EXPECT_LT(after, before - 30 * 1024) << "RssFile " << before << " -> " << after << " KiB";
  EXPECT_EQ(std::memcmp(t.data, w.data(), w.size() * 4), 0);
}
#endif

TEST_F(ModelFileTest, LookupsNameTheTensorAndShapes) {
  Parts p;
  // json::array: with clang, {one_object} is that object, not an array holding it
  p.meta["tensors"] = json::array({tensor("w", "f32", {2, 3}, 0, 24)});
  p.data = std::string(64, '\0');
  write(bytes_of(p));
  const ModelFile f(path_);
  const auto message = [&](auto fn) -> std::string {
    try {
      fn();
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(message([&] {
              f.get("w", {3, 2});
            }),
            path_ + ": tensor 'w' has shape [2, 3], expected [3, 2]");
  EXPECT_EQ(message([&] { f.get("v", {3}); }), path_ + ": tensor 'v' is missing");
  EXPECT_EQ(message([&] { f.bytes("w"); }), path_ + ": entry 'w' is not of dtype bytes");
}

TEST_F(ModelFileTest, HeaderChecks) {
  EXPECT_EQ(error_for(""), "file is empty (expected a Krafla .mlb/.mlt file or a GGUF file)");
  EXPECT_EQ(error_for("KRAFLAMB"), "truncated header: 8 bytes, the header needs 24");
  EXPECT_EQ(error_for("NOTKRAFL"), "wrong magic: not a Krafla .mlb/.mlt file");
  Parts p;
  p.magic = std::string("GGUF\3\0\0\0", 8);
  // GGUF's magic: read as a GGUF file (gguf_file_test.cpp), whose counts this is not.
  EXPECT_EQ(error_for(bytes_of(p)), "metadata count 51 does not fit in the file at offset 16");
  p = Parts{};
  p.version = kMlbVersion + 1;
  EXPECT_EQ(error_for(bytes_of(p)),
            fmt::format("format version {} is newer than this build reads (version {}); update "
                        "Krafla",
                        kMlbVersion + 1, kMlbVersion));
  p.version = 0;
  EXPECT_EQ(error_for(bytes_of(p)), "format version 0 is not a valid version");
  p = Parts{};
  p.flags = 4;
  EXPECT_EQ(error_for(bytes_of(p)), "unknown header flags 0x4 (version 1 defines none)");
  p = Parts{};
  p.json_size_delta = 1000;
  EXPECT_NE(error_for(bytes_of(p)).find("truncated metadata"), std::string::npos);
}

TEST_F(ModelFileTest, MetadataChecks) {
  Parts p;
  p.json_text_override = "{\"format\": ";
  EXPECT_NE(error_for(bytes_of(p)).find("corrupt metadata JSON"), std::string::npos);
  // a number too large for a double: nlohmann throws out_of_range, not parse_error (fuzzing)
  p.json_text_override = "1111111111E11111110";
  EXPECT_NE(error_for(bytes_of(p)).find("corrupt metadata JSON"), std::string::npos);
  p = Parts{};
  p.json_text_override = "{\"a\": " + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(error_for(bytes_of(p)), "corrupt metadata JSON: nested more than 512 levels deep");
  p = Parts{};
  p.json_text_override = "[1]";
  EXPECT_EQ(error_for(bytes_of(p)), "metadata is not a JSON object");
  p = Parts{};
  p.meta["format"] = "gguf";
  EXPECT_EQ(error_for(bytes_of(p)), "metadata field 'format' is not \"krafla-mlb\"");
  p = Parts{};
  p.meta["kind"] = "lora";
  EXPECT_EQ(error_for(bytes_of(p)), "unknown file kind 'lora' (expected 'model' or 'tokenizer')");
  p = Parts{};
  p.meta.erase("tensors");
  EXPECT_EQ(error_for(bytes_of(p)), "metadata field 'tensors' missing or not an array");
}

TEST_F(ModelFileTest, TensorEntryChecks) {
  EXPECT_EQ(error_for_tensor(tensor("w", "f64", {2}, 0, 16)), "tensor 'w': unknown dtype 'f64'");
  EXPECT_EQ(error_for_tensor(tensor("w", "f32", {2}, 8, 8)),
            "tensor 'w': offset 8 is not 64-byte aligned");
  EXPECT_EQ(error_for_tensor(tensor("w", "f32", {2}, 0, 12)),
            "tensor 'w': size 12 does not match dtype f32 and shape 2 (expected 8 bytes)");
  EXPECT_EQ(error_for_tensor(tensor("w", "q8_0", {2, 16}, 0, 34)),
            "tensor 'w': q8_0 needs the last dimension (16) to be a multiple of 32");
  EXPECT_EQ(error_for_tensor(tensor("w", "f32", {1, 2, 3, 4}, 0, 96)),
            "tensor 'w': 'shape' must be an array of 1 to 3 dimensions");
  EXPECT_EQ(error_for_tensor(tensor("w", "f32", {1, 2, 3}, 0, 12)),  // 3-D: experts' matrices
            "tensor 'w': size 12 does not match dtype f32 and shape 1x2x3 (expected 24 bytes)");
  // no product of the dimensions may wrap around (each is below 2^40)
  EXPECT_EQ(
      error_for_tensor(tensor("w", "f32", {int64_t{1} << 30, int64_t{1} << 30, 1 << 20}, 0, 0)),
      "tensor 'w': too many elements");
  EXPECT_EQ(error_for_tensor(tensor("w", "f32", {0}, 0, 0)),
            "tensor 'w': bad dimension 0 in shape");
  json no_size = tensor("w", "f32", {2}, 0, 8);
  no_size.erase("size");
  EXPECT_EQ(error_for_tensor(no_size), "tensor 'w': missing field 'size'");
  EXPECT_EQ(error_for_tensor({{"dtype", "f32"}}), "tensor #0: missing 'name'");
  // Past the end: 64 bytes of data, a tensor of 64 bytes at offset 64.
  EXPECT_NE(error_for_tensor(tensor("w", "f32", {16}, 64, 64)).find("tensor 'w': data ["),
            std::string::npos);
  Parts p;
  p.meta["tensors"] = {tensor("w", "f32", {2}, 0, 8), tensor("w", "f32", {2}, 0, 8)};
  p.data = std::string(64, '\0');
  EXPECT_EQ(error_for(bytes_of(p)), "tensor 'w': appears twice in the tensor table");
}

}  // namespace
}  // namespace krafla
