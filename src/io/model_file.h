// Opens, validates and maps a model file: a .mlb model or .mlt tokenizer file (docs/format.md),
// or a GGUF file, which is translated on open into the same metadata and tensor views by the
// importer the caller hands in (model/gguf_import.h, docs/gguf.md).
#pragma once
#include <cstdint>
#include <deque>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/aligned.h"
#include "io/mapped_file.h"

namespace krafla {

enum class DType { F32, F16, BF16, Q8_0, Q4_0, Q4_M, Q6_H, Q5_M, IQ4_NL, Q3_H, Bytes };

const char* dtype_name(DType t);
// Elements per block and bytes per block of type t ({1, 4} for F32).
std::pair<int64_t, int64_t> dtype_block(DType t);

struct TensorView {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;  // [rows, cols] for matrices, [n] for vectors, [E, rows, cols]
                               // for E experts' matrices (stored one after another)
  const uint8_t* data;  // inside the mapping (64-byte aligned in a .mlb, 32 in a GGUF) or owned
  uint64_t offset;      // of data, from the file's data_offset (docs/format.md)
  uint64_t size;        // bytes
  // A GGUF matrix of a type without kernels (a K-quant), rewritten at load: its ggml type
  // (0 for any other tensor) and, while its rows are in the file's order, the file's bytes
  // (one row of `source_row` bytes per row), which row lookups decode exactly
  // (gguf_dequantize_row) and the loader rewrites as it packs: `data` is then null, no
  // rewritten copy is made. A matrix rewritten whole to be reordered (q/k rows, Qwen3.5's
  // heads) is a copy in `data`; its `source` is null once its rows leave the file's order.
  const uint8_t* source = nullptr;
  uint32_t source_type = 0;
  uint64_t source_row = 0;
  int64_t rows() const {  // all but the last dimension: the rows of all the matrices
    int64_t r = 1;
    for (size_t i = 0; i + 1 < shape.size(); ++i) r *= shape[i];
    return r;
  }
  int64_t cols() const { return shape.back(); }
};

constexpr uint32_t kMlbVersion = 1;
constexpr char kMlbMagic[8] = {'K', 'R', 'A', 'F', 'L', 'A', 'M', 'B'};

class GgufFile;

// A GGUF file translated into a .mlb's metadata and tensor views.
struct GgufImport {
  nlohmann::json meta;              // as a .mlb's: format, kind, config, tokenizer, tensors, source
  std::vector<TensorView> tensors;  // .mlb names, plus the two tokenizer `bytes` entries
  std::deque<AlignedBuffer> owned;  // memory of the views that are not in the mapping
};
// The translation (model/gguf_import.h's import_gguf: it needs the model families, which sit
// above this layer).
using GgufImporter = GgufImport (*)(const GgufFile& g);

class ModelFile {
 public:
  // Maps `path` and validates the header, the metadata JSON and every tensor entry against
  // the file size (a GGUF file: its header, key/values and tensor infos, then `import_gguf`'s
  // translation; without an importer a GGUF file is refused). Throws krafla::Error naming the
  // file and what is wrong.
  explicit ModelFile(const std::string& path, GgufImporter import_gguf = nullptr);
  ~ModelFile();
  ModelFile(const ModelFile&) = delete;
  ModelFile& operator=(const ModelFile&) = delete;

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
  bool is_gguf() const { return gguf_ != nullptr; }
  // Frees the memory of a tensor the import made (a GGUF's requantized or reordered matrix)
  // once nothing reads it any more (its packed copy is what runs); views of it become null.
  // False, and nothing changes, for data inside the mapping (drop_pages is for that).
  bool release(const uint8_t* data);
  // Takes the pages of a tensor inside the mapping out of the resident set: its views stay
  // valid, and reading them maps back what is read (MappedFile::drop_pages). Nothing for a
  // tensor the import made.
  void drop_pages(const uint8_t* data, uint64_t bytes) const;

 private:
  void parse();
  std::string path_;
  std::unique_ptr<MappedFile> map_;
  std::unique_ptr<GgufFile> gguf_;   // a GGUF source (which then holds the mapping)
  std::deque<AlignedBuffer> owned_;  // bytes of the views a GGUF import made
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  uint32_t version_ = 0;
  uint64_t data_offset_ = 0;
  nlohmann::json meta_;
  std::string kind_;
  std::vector<TensorView> tensors_;
};

}  // namespace krafla
