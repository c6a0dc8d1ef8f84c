// Opens, validates and maps a .mlb model file or .mlt tokenizer file (docs/format.md).
#pragma once
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace krafla {

enum class DType { F32, F16, BF16, Q8_0, Q4_0, Bytes };

const char* dtype_name(DType t);

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // [rows, cols] for matrices, [n] for vectors
  const uint8_t* data;         // inside the mapping, 64-byte aligned
  uint64_t offset;             // of data, from the file's data_offset (docs/format.md)
  uint64_t size;               // bytes
  int64_t rows() const { return shape.size() == 2 ? shape[0] : 1; }
  int64_t cols() const { return shape.back(); }
};

constexpr uint32_t kMlbVersion = 1;
constexpr char kMlbMagic[8] = {'K', 'R', 'A', 'F', 'L', 'A', 'M', 'B'};

class MlbFile {
 public:
  // Maps `path` and validates the header, the metadata JSON and every tensor entry against
  // the file size. Throws krafla::Error naming the file and what is wrong.
  explicit MlbFile(const std::string& path);
  ~MlbFile();
  MlbFile(const MlbFile&) = delete;
  MlbFile& operator=(const MlbFile&) = delete;

  const std::string& path() const { return path_; }
  const nlohmann::json& meta() const { return meta_; }
  std::string_view kind() const { return kind_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* find(std::string_view name) const;
  // Throws when absent or when its shape is not `shape` (the caller checks the dtype).
  const TensorView& get(std::string_view name, std::vector<int64_t> shape) const;
  std::string_view bytes(std::string_view name) const;  // a `bytes` entry as text
  uint64_t file_size() const { return size_; }
  uint32_t version() const { return version_; }
  uint64_t data_offset() const { return data_offset_; }

 private:
  void parse();
  std::string path_;
  int fd_ = -1;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t data_offset_ = 0;
  nlohmann::json meta_;
  std::string kind_;
  std::vector<TensorView> tensors_;
};

}  // namespace krafla
