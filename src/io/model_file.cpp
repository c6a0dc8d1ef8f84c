#include "io/model_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>

#include "io/gguf_file.h"
#include "krafla/error.h"
#include "krafla/json_depth.h"

namespace krafla {
namespace {

struct DTypeInfo {
  DType type;
  const char* name;
  int block;        // elements per block
  int block_bytes;  // bytes per block
};
constexpr DTypeInfo kDTypes[] = {
    {DType::F32, "f32", 1, 4},     {DType::F16, "f16", 1, 2},     {DType::BF16, "bf16", 1, 2},
    {DType::Q8_0, "q8_0", 32, 34}, {DType::Q4_0, "q4_0", 32, 18}, {DType::Q4_M, "q4_m", 32, 20},
    {DType::Q6_H, "q6_h", 32, 28}, {DType::Q5_M, "q5_m", 32, 24}, {DType::IQ4_NL, "iq4_nl", 32, 18},
    {DType::Q3_H, "q3_h", 32, 16}, {DType::Bytes, "bytes", 1, 1},
};

// Krafla's types made from GGUF rows at load, never stored in a .mlb.
bool gguf_only(DType t) {
  return t == DType::Q4_M || t == DType::Q6_H || t == DType::Q5_M || t == DType::IQ4_NL ||
         t == DType::Q3_H;
}

const DTypeInfo& info(DType t) {
  for (const auto& d : kDTypes)
    if (d.type == t) return d;
  throw Error("internal: unknown dtype");
}

uint64_t read_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}
uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

}  // namespace

const char* dtype_name(DType t) { return info(t).name; }
std::pair<int64_t, int64_t> dtype_block(DType t) { return {info(t).block, info(t).block_bytes}; }

ModelFile::ModelFile(const std::string& path, GgufImporter import_gguf) : path_(path) {
  map_ = std::make_unique<MappedFile>(path, "a Krafla .mlb/.mlt file or a GGUF file");
  if (map_->size() >= 4 && std::memcmp(map_->data(), "GGUF", 4) == 0) {
    if (!import_gguf)
      throw Error(fmt::format("{}: a GGUF file, where a .mlb/.mlt file is read", path));
    gguf_ = std::make_unique<GgufFile>(path, std::move(map_));
    GgufImport m = import_gguf(*gguf_);
    base_ = gguf_->data();  // tensors stored as they run are views into it
    size_ = gguf_->file_size();
    version_ = gguf_->version();
    data_offset_ = gguf_->data_offset();
    meta_ = std::move(m.meta);
    kind_ = meta_["kind"].get<std::string>();
    tensors_ = std::move(m.tensors);
    owned_ = std::move(m.owned);
    return;
  }
  base_ = map_->data();
  size_ = map_->size();
  parse();
}

ModelFile::~ModelFile() = default;

void ModelFile::parse() {
  const auto fail = [&](const std::string& msg) { throw Error(fmt::format("{}: {}", path_, msg)); };
  if (size_ < 24) {
    if (size_ >= 8 && std::memcmp(base_, kMlbMagic, 8) != 0)
      fail("wrong magic: not a Krafla .mlb/.mlt file");
    fail(fmt::format("truncated header: {} bytes, the header needs 24", size_));
  }
  if (std::memcmp(base_, kMlbMagic, 8) != 0) {
    fail("wrong magic: not a Krafla .mlb/.mlt file");
  }
  const uint32_t version = read_u32(base_ + 8);
  if (version > kMlbVersion)
    fail(fmt::format("format version {} is newer than this build reads (version {}); update Krafla",
                     version, kMlbVersion));
  if (version == 0) fail("format version 0 is not a valid version");
  version_ = version;
  const uint32_t flags = read_u32(base_ + 12);
  if (flags != 0) fail(fmt::format("unknown header flags 0x{:x} (version 1 defines none)", flags));
  const uint64_t json_size = read_u64(base_ + 16);
  if (json_size > size_ - 24)
    fail(
        fmt::format("truncated metadata: JSON of {} bytes at offset 24 runs past the end of "
                    "the {}-byte file",
                    json_size, size_));
  const std::string_view meta_text(reinterpret_cast<const char*>(base_ + 24), json_size);
  if (!json_depth_ok(meta_text))
    fail(fmt::format("corrupt metadata JSON: nested more than {} levels deep", kMaxJsonDepth));
  try {
    meta_ = nlohmann::json::parse(meta_text);
  } catch (const nlohmann::json::parse_error& e) {
    fail(fmt::format("corrupt metadata JSON at byte {}: {}", 24 + e.byte, e.what()));
  } catch (const nlohmann::json::exception& e) {  // a number out of range (found by fuzzing)
    fail(fmt::format("corrupt metadata JSON: {}", e.what()));
  }
  const uint64_t data_offset = (24 + json_size + 63) / 64 * 64;
  data_offset_ = data_offset;
  if (!meta_.is_object()) fail("metadata is not a JSON object");
  const auto format = meta_.find("format");
  if (format == meta_.end() || *format != "krafla-mlb")
    fail("metadata field 'format' is not \"krafla-mlb\"");
  if (!meta_.contains("kind") || !meta_["kind"].is_string()) fail("metadata field 'kind' missing");
  kind_ = meta_["kind"].get<std::string>();
  if (kind_ != "model" && kind_ != "tokenizer")
    fail(fmt::format("unknown file kind '{}' (expected 'model' or 'tokenizer')", kind_));
  if (!meta_.contains("tensors") || !meta_["tensors"].is_array())
    fail("metadata field 'tensors' missing or not an array");

  for (size_t i = 0; i < meta_["tensors"].size(); ++i) {
    const auto& t = meta_["tensors"][i];
    const std::string where = fmt::format("tensor #{}", i);
    if (!t.is_object() || !t.contains("name") || !t["name"].is_string())
      fail(where + ": missing 'name'");
    TensorView v;
    v.name = t["name"].get<std::string>();
    const auto tfail = [&](const std::string& msg) {
      fail(fmt::format("tensor '{}': {}", v.name, msg));
    };
    for (const char* key : {"dtype", "shape", "offset", "size"})
      if (!t.contains(key)) tfail(fmt::format("missing field '{}'", key));
    if (!t["dtype"].is_string()) tfail("'dtype' is not a string");
    const std::string dt = t["dtype"].get<std::string>();
    const DTypeInfo* di = nullptr;
    for (const auto& d : kDTypes)
      if (dt == d.name && !gguf_only(d.type)) di = &d;
    if (!di) tfail(fmt::format("unknown dtype '{}'", dt));
    v.dtype = di->type;
    if (!t["shape"].is_array() || t["shape"].empty() || t["shape"].size() > 3)
      tfail("'shape' must be an array of 1 to 3 dimensions");
    for (const auto& d : t["shape"]) {
      if (!d.is_number_integer() || d.get<int64_t>() <= 0)
        tfail(fmt::format("bad dimension {} in shape", d.dump()));
      if (d.get<int64_t>() > (int64_t{1} << 40)) tfail("dimension too large");
      v.shape.push_back(d.get<int64_t>());
    }
    // (the sizes below multiply the dimensions: at most 2^48 elements)
    for (int64_t elems = 1; int64_t dim : v.shape) {
      if (dim > (int64_t{1} << 48) / elems) tfail("too many elements");
      elems *= dim;
    }
    if (!t["offset"].is_number_unsigned() || !t["size"].is_number_unsigned())
      tfail("'offset' and 'size' must be non-negative integers");
    const uint64_t off = t["offset"].get<uint64_t>();
    v.size = t["size"].get<uint64_t>();
    if (off % 64 != 0) tfail(fmt::format("offset {} is not 64-byte aligned", off));
    const int64_t cols = v.shape.back();
    if (di->block > 1 && cols % di->block != 0)
      tfail(fmt::format("{} needs the last dimension ({}) to be a multiple of {}", dt, cols,
                        di->block));
    const uint64_t n = static_cast<uint64_t>(v.rows()) * static_cast<uint64_t>(cols);
    const uint64_t expect = n / di->block * di->block_bytes;
    if (v.size != expect)
      tfail(fmt::format("size {} does not match dtype {} and shape {} (expected {} bytes)", v.size,
                        dt, fmt::join(v.shape, "x"), expect));
    if (off > size_ || data_offset > size_ - off || v.size > size_ - data_offset - off)
      tfail(fmt::format("data [{}, {}) is not within the {}-byte file (truncated?)",
                        data_offset + off, data_offset + off + v.size, size_));
    v.data = base_ + data_offset + off;
    v.offset = off;
    for (const auto& other : tensors_)
      if (other.name == v.name) tfail("appears twice in the tensor table");
    tensors_.push_back(std::move(v));
  }
}

void ModelFile::drop_pages(const uint8_t* data, uint64_t bytes) const {
  if (data >= base_ && data < base_ + size_)
    MappedFile::drop_pages(data, std::min(bytes, uint64_t(base_ + size_ - data)));
}

bool ModelFile::release(const uint8_t* data) {
  for (AlignedBuffer& b : owned_)
    if (data && b.data() == data) {
      b.resize(0);
      for (TensorView& t : tensors_)
        if (t.data == data) t.data = nullptr;
      return true;
    }
  return false;
}

const TensorView* ModelFile::find(std::string_view name) const {
  for (const auto& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

const TensorView& ModelFile::get(std::string_view name, std::vector<int64_t> shape) const {
  const TensorView* t = find(name);
  if (!t) throw Error(fmt::format("{}: tensor '{}' is missing", path_, name));
  if (t->shape != shape)
    throw Error(fmt::format("{}: tensor '{}' has shape [{}], expected [{}]", path_, name,
                            fmt::join(t->shape, ", "), fmt::join(shape, ", ")));
  return *t;
}

std::string_view ModelFile::bytes(std::string_view name) const {
  const TensorView* t = find(name);
  if (!t) throw Error(fmt::format("{}: entry '{}' is missing", path_, name));
  if (t->dtype != DType::Bytes)
    throw Error(fmt::format("{}: entry '{}' is not of dtype bytes", path_, name));
  return {reinterpret_cast<const char*>(t->data), t->size};
}

}  // namespace krafla
