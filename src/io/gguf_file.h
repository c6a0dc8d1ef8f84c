// Opens, validates and maps a GGUF file (ggml's docs/gguf.md, versions 2 and 3): the metadata
// key/values and the tensor infos. Every count, length, offset and shape is checked against
// the file size before it is used; a bad file gets a krafla::Error naming the field and its
// byte offset.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "io/mapped_file.h"

namespace krafla {

// GGUF metadata value types (gguf_type), numbered 0 (U8) to 12 (F64) in this order.
enum class GgufType : uint32_t {
  U8,
  I8,
  U16,
  I16,
  U32,
  I32,
  F32,
  Bool,
  String,
  Array,
  U64,
  I64,
  F64
};
const char* gguf_type_name(GgufType t);

// One metadata value. Numbers are kept as int64 / uint64 / double as they were stored; an
// array holds its elements' type and either the strings or the numbers (arrays of arrays are
// refused at parse time).
struct GgufValue {
  GgufType type = GgufType::U8;
  GgufType elem = GgufType::U8;  // arrays
  bool is_float = false;         // F32/F64 (scalar or elements)
  bool is_signed = false;        // I8..I64
  int64_t i = 0;                 // integers and bools
  double f = 0;                  // floats
  std::string s;
  std::vector<std::string> strings;  // array of strings
  std::vector<double> numbers;       // array of numbers or bools
};

// ggml tensor types (ggml_type) this reader knows the block size of.
struct GgmlTypeInfo {
  uint32_t id;
  const char* name;
  int block;        // elements per block
  int block_bytes;  // bytes per block; 0: a type ggml no longer has
};
const GgmlTypeInfo* ggml_type_info(uint32_t id);  // nullptr when unknown

struct GgufTensor {
  std::string name;
  uint32_t type;               // ggml_type
  std::vector<int64_t> shape;  // row-major: [rows, cols] (the file's ne reversed)
  uint64_t offset;             // from the data section
  uint64_t size;               // bytes
  const uint8_t* data;         // inside the mapping
};

class GgufFile {
 public:
  explicit GgufFile(const std::string& path);
  // The same on a mapping of `path` made already (ModelFile maps before it knows the format).
  GgufFile(const std::string& path, std::unique_ptr<MappedFile> map);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return size_; }
  const uint8_t* data() const { return base_; }  // the whole file, mapped
  uint64_t data_offset() const { return data_offset_; }
  uint32_t alignment() const { return alignment_; }
  const std::map<std::string, GgufValue>& kv() const { return kv_; }
  const std::vector<GgufTensor>& tensors() const { return tensors_; }

  const GgufValue* find(std::string_view key) const;  // nullptr when absent
  // Typed getters: throw naming the key when it is absent (no default) or of another kind.
  std::string str(std::string_view key) const;
  std::string str(std::string_view key, std::string def) const;
  int64_t integer(std::string_view key) const;
  int64_t integer(std::string_view key, int64_t def) const;
  double number(std::string_view key) const;  // any number type
  double number(std::string_view key, double def) const;
  bool boolean(std::string_view key, bool def) const;
  const GgufValue& array(std::string_view key) const;

 private:
  void parse();
  std::string path_;
  std::unique_ptr<MappedFile> map_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;
  uint64_t data_offset_ = 0;
  std::map<std::string, GgufValue> kv_;
  std::vector<GgufTensor> tensors_;
};

}  // namespace krafla
