// The GGUF reader, on files assembled here byte by byte as ggml's docs/gguf.md lays them out
// (independently of tools/convert/gguf.py): every value type, tensor infos and alignment, and the
// refusal of each broken count, length, type and offset by a message naming it and its offset.
#include "io/gguf_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "krafla/error.h"
#include "tests/test_files.h"

namespace krafla {
namespace {

namespace fs = std::filesystem;

// Little-endian pieces of a file.
struct Bytes {
  std::string b;
  template <class T>
  Bytes& put(T v) {
    b.append(reinterpret_cast<const char*>(&v), sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    b += s;
    return *this;
  }
  Bytes& key(const std::string& k, GgufType t) {
    str(k);
    return put<uint32_t>(uint32_t(t));
  }
};

// A header, `n_kv` key/values and `n_tensors` tensor infos come from the caller; the data
// section is padded to `align`.
std::string file_of(uint64_t n_tensors, uint64_t n_kv, const std::string& kv,
                    const std::string& infos, const std::string& data, size_t align = 32) {
  Bytes h;
  h.b = "GGUF";
  h.put<uint32_t>(3).put<uint64_t>(n_tensors).put<uint64_t>(n_kv);
  std::string out = h.b + kv + infos;
  out.resize((out.size() + align - 1) / align * align, '\0');
  return out + data;
}

class GgufFileTest : public test::TempFileTest {
 protected:
  std::string error_for(const std::string& bytes) {
    return error_opening(bytes, [](const std::string& p) { GgufFile f(p); });
  }
};

TEST_F(GgufFileTest, ReadsEveryTypeAndTheTensors) {
  Bytes kv;
  kv.key("general.architecture", GgufType::String).str("llama");
  kv.key("a.u8", GgufType::U8).put<uint8_t>(200);
  kv.key("a.i16", GgufType::I16).put<int16_t>(-3);
  kv.key("a.u64", GgufType::U64).put<uint64_t>(uint64_t{1} << 40);
  kv.key("a.f32", GgufType::F32).put<float>(1.5f);
  kv.key("a.f64", GgufType::F64).put<double>(0.1);
  kv.key("a.bool", GgufType::Bool).put<uint8_t>(1);
  kv.key("a.ints", GgufType::Array).put<uint32_t>(uint32_t(GgufType::I32)).put<uint64_t>(3);
  kv.put<int32_t>(1).put<int32_t>(-2).put<int32_t>(3);
  kv.key("a.strs", GgufType::Array).put<uint32_t>(uint32_t(GgufType::String)).put<uint64_t>(2);
  kv.str("x").str("");
  Bytes ti;  // w: 2 rows x 3 floats (ne = [3, 2]); v: 32 halves at offset 32
  ti.str("w").put<uint32_t>(2).put<uint64_t>(3).put<uint64_t>(2).put<uint32_t>(0).put<uint64_t>(0);
  ti.str("v").put<uint32_t>(1).put<uint64_t>(32).put<uint32_t>(1).put<uint64_t>(32);
  std::string data(32 + 64, '\0');
  const float w[6] = {1, 2, 3, 4, 5, 6};
  std::memcpy(data.data(), w, sizeof(w));
  write(file_of(2, 9, kv.b, ti.b, data));

  GgufFile f(path_);
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.str("general.architecture"), "llama");
  EXPECT_EQ(f.integer("a.u8"), 200);
  EXPECT_EQ(f.integer("a.i16"), -3);
  EXPECT_EQ(f.integer("a.u64"), int64_t{1} << 40);
  EXPECT_EQ(f.number("a.f32"), 1.5);
  EXPECT_EQ(f.number("a.f64"), 0.1);
  EXPECT_EQ(f.number("a.u8"), 200.0);  // integers are numbers too
  EXPECT_TRUE(f.boolean("a.bool", false));
  EXPECT_EQ(f.array("a.ints").numbers, (std::vector<double>{1, -2, 3}));
  EXPECT_EQ(f.array("a.strs").strings, (std::vector<std::string>{"x", ""}));
  EXPECT_EQ(f.integer("absent", 7), 7);
  ASSERT_EQ(f.tensors().size(), 2u);
  const GgufTensor& t = f.tensors()[0];
  EXPECT_EQ(t.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(t.size, 24u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  EXPECT_EQ(reinterpret_cast<const float*>(t.data)[5], 6.0f);
  EXPECT_EQ(f.tensors()[1].size, 64u);
  EXPECT_EQ(f.tensors()[1].data, t.data + 32);
  // the typed getters name the key and the kinds
  EXPECT_THROW(f.str("a.u8"), Error);
  try {
    f.integer("a.f32");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path_ + ": metadata 'a.f32' is f32, expected an integer");
  }
  try {
    f.str("missing");
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), path_ + ": metadata 'missing' is missing");
  }
}

TEST_F(GgufFileTest, RefusesBrokenFieldsByNameAndOffset) {
  EXPECT_EQ(error_for("GGML0000"), "wrong magic: not a GGUF file at offset 0");
  EXPECT_EQ(error_for("GGUF"),
            "version (4 bytes) runs past the end of the 4-byte file at offset 4");
  Bytes v1;
  v1.b = "GGUF";
  v1.put<uint32_t>(1).put<uint64_t>(0).put<uint64_t>(0);
  EXPECT_EQ(error_for(v1.b), "GGUF version 1 is not supported (2 and 3 are) at offset 4");
  EXPECT_EQ(error_for(file_of(0, uint64_t{1} << 61, "", "", "")),
            "metadata count 2305843009213693952 does not fit in the file at offset 16");
  Bytes k;  // a key whose length runs past the end
  k.put<uint64_t>(1000).b += "abc";
  EXPECT_EQ(error_for(file_of(0, 1, k.b, "", "")),
            "key #0 length 1000 runs past the end of the 64-byte file at offset 24");
  Bytes bt;  // an unknown value type
  bt.key("k", GgufType(13));
  EXPECT_EQ(error_for(file_of(0, 1, bt.b, "", "")), "key 'k': unknown value type 13 at offset 33");
  Bytes arr;  // an array longer than the file
  arr.key("k", GgufType::Array).put<uint32_t>(uint32_t(GgufType::U32)).put<uint64_t>(1 << 20);
  EXPECT_EQ(error_for(file_of(0, 1, arr.b, "", "")),
            "key 'k': array length 1048576 does not fit in the 15 bytes left at offset 41");
  Bytes nested;
  nested.key("k", GgufType::Array).put<uint32_t>(uint32_t(GgufType::Array)).put<uint64_t>(0);
  EXPECT_EQ(error_for(file_of(0, 1, nested.b, "", "")),
            "key 'k': unsupported array element type 9 at offset 37");
  Bytes b2;
  b2.key("k", GgufType::Bool).put<uint8_t>(2);
  EXPECT_EQ(error_for(file_of(0, 1, b2.b, "", "")),
            "value of 'k': bool value 2 is neither 0 nor 1 at offset 37");
  Bytes al;
  al.key("general.alignment", GgufType::U32).put<uint32_t>(24);
  EXPECT_EQ(error_for(file_of(0, 1, al.b, "", "")),
            "general.alignment must be a u32 power of two, is u32 24");

  const auto tensor = [](uint32_t n_dims, uint64_t ne0, uint32_t type, uint64_t off) {
    Bytes t;
    t.str("t").put<uint32_t>(n_dims).put<uint64_t>(ne0);
    for (uint32_t d = 1; d < n_dims; ++d) t.put<uint64_t>(1);
    return t.put<uint32_t>(type).put<uint64_t>(off).b;
  };
  const std::string data(64, '\0');
  EXPECT_EQ(error_for(file_of(1, 0, "", tensor(5, 4, 0, 0), data)),
            "tensor 't': n_dims 5 (1 to 4 allowed) at offset 33");
  EXPECT_EQ(error_for(file_of(1, 0, "", tensor(1, 0, 0, 0), data)),
            "tensor 't': bad dimension 0 at offset 37");
  EXPECT_EQ(error_for(file_of(1, 0, "", tensor(1, 4, 31, 0), data)),
            "tensor 't': unknown ggml type 31 at offset 45");
  EXPECT_EQ(error_for(file_of(1, 0, "", tensor(1, 48, 12, 0), data)),
            "tensor 't': Q4_K needs the row length (48) to be a multiple of 256 at offset 45");
  EXPECT_EQ(error_for(file_of(1, 0, "", tensor(1, 4, 0, 16), data)),
            "tensor 't': offset 16 is not a multiple of the alignment 32 at offset 49");
  EXPECT_EQ(error_for(file_of(1, 0, "", tensor(1, 32, 0, 0), data)),
            "tensor 't' data [64, 192) is not within the 128-byte file (truncated?)");
  const std::string two = tensor(1, 4, 0, 0) + tensor(1, 4, 0, 32);
  EXPECT_EQ(error_for(file_of(2, 0, "", two, data)), "tensor 't' appears twice at offset 57");
}

}  // namespace
}  // namespace krafla
