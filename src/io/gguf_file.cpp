#include "io/gguf_file.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>

#include "krafla/error.h"

namespace krafla {
namespace {

constexpr GgmlTypeInfo kGgmlTypes[] = {
    {0, "F32", 1, 4},         {1, "F16", 1, 2},         {2, "Q4_0", 32, 18},
    {3, "Q4_1", 32, 20},      {6, "Q5_0", 32, 22},      {7, "Q5_1", 32, 24},
    {8, "Q8_0", 32, 34},      {9, "Q8_1", 32, 36},      {10, "Q2_K", 256, 84},
    {11, "Q3_K", 256, 110},   {12, "Q4_K", 256, 144},   {13, "Q5_K", 256, 176},
    {14, "Q6_K", 256, 210},   {15, "Q8_K", 256, 292},   {16, "IQ2_XXS", 256, 66},
    {17, "IQ2_XS", 256, 74},  {18, "IQ3_XXS", 256, 98}, {19, "IQ1_S", 256, 50},
    {20, "IQ4_NL", 32, 18},   {21, "IQ3_S", 256, 110},  {22, "IQ2_S", 256, 82},
    {23, "IQ4_XS", 256, 136}, {24, "I8", 1, 1},         {25, "I16", 1, 2},
    {26, "I32", 1, 4},        {27, "I64", 1, 8},        {28, "F64", 1, 8},
    {29, "IQ1_M", 256, 56},   {30, "BF16", 1, 2},       {34, "TQ1_0", 256, 54},
    {35, "TQ2_0", 256, 66},   {39, "MXFP4", 32, 17},    {40, "NVFP4", 64, 36},
    {41, "Q1_0", 128, 18},    {42, "Q2_0", 64, 18},
};

constexpr const char* kTypeNames[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
constexpr int kScalarBytes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};

// Reads the header and the metadata front to back; every read is checked against the end of
// the file and names what it was reading and where.
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* base, uint64_t size)
      : path_(path), base_(base), size_(size) {}
  uint64_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }

  [[noreturn]] void fail(const std::string& what, uint64_t at) const {
    throw Error(fmt::format("{}: {} at offset {}", path_, what, at));
  }
  const uint8_t* take(uint64_t n, const std::string& what) {
    if (n > left())
      fail(fmt::format("{} ({} bytes) runs past the end of the {}-byte file", what, n, size_),
           pos_);
    const uint8_t* p = base_ + pos_;
    pos_ += n;
    return p;
  }
  template <class T>
  T get(const std::string& what) {
    T v;
    std::memcpy(&v, take(sizeof(T), what), sizeof(T));
    return v;
  }
  std::string str(const std::string& what) {
    const uint64_t at = pos_;
    const uint64_t n = get<uint64_t>(what + " length");
    if (n > left())
      fail(fmt::format("{} length {} runs past the end of the {}-byte file", what, n, size_), at);
    const uint8_t* p = take(n, what);
    return std::string(reinterpret_cast<const char*>(p), n);
  }

 private:
  const std::string& path_;
  const uint8_t* base_;
  uint64_t size_;
  uint64_t pos_ = 0;
};

bool known_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// One scalar of type t into v (numbers, bools) or s (strings).
void read_scalar(Cursor& c, GgufType t, const std::string& what, GgufValue& v, std::string& s) {
  switch (t) {
    case GgufType::U8:
      v.i = c.get<uint8_t>(what);
      break;
    case GgufType::I8:
      v.i = c.get<int8_t>(what);
      break;
    case GgufType::U16:
      v.i = c.get<uint16_t>(what);
      break;
    case GgufType::I16:
      v.i = c.get<int16_t>(what);
      break;
    case GgufType::U32:
      v.i = c.get<uint32_t>(what);
      break;
    case GgufType::I32:
      v.i = c.get<int32_t>(what);
      break;
    case GgufType::U64:
      v.i = int64_t(c.get<uint64_t>(what));
      break;
    case GgufType::I64:
      v.i = c.get<int64_t>(what);
      break;
    case GgufType::F32:
      v.f = c.get<float>(what);
      break;
    case GgufType::F64:
      v.f = c.get<double>(what);
      break;
    case GgufType::Bool: {
      const uint64_t at = c.pos();
      const uint8_t b = c.get<uint8_t>(what);
      if (b > 1) c.fail(fmt::format("{}: bool value {} is neither 0 nor 1", what, b), at);
      v.i = b;
      break;
    }
    case GgufType::String:
      s = c.str(what);
      break;
    case GgufType::Array:
      break;  // not a scalar
  }
}

GgufValue read_value(Cursor& c, const std::string& key) {
  GgufValue v;
  const uint64_t at = c.pos();
  const uint32_t t = c.get<uint32_t>(fmt::format("value type of '{}'", key));
  if (!known_type(t)) c.fail(fmt::format("key '{}': unknown value type {}", key, t), at);
  v.type = GgufType(t);
  const auto flags = [](GgufType x, GgufValue& out) {
    out.is_float = x == GgufType::F32 || x == GgufType::F64;
    out.is_signed =
        x == GgufType::I8 || x == GgufType::I16 || x == GgufType::I32 || x == GgufType::I64;
  };
  if (v.type != GgufType::Array) {
    flags(v.type, v);
    read_scalar(c, v.type, fmt::format("value of '{}'", key), v, v.s);
    return v;
  }
  const uint64_t eat = c.pos();
  const uint32_t e = c.get<uint32_t>(fmt::format("element type of '{}'", key));
  if (!known_type(e) || GgufType(e) == GgufType::Array)
    c.fail(fmt::format("key '{}': unsupported array element type {}", key, e), eat);
  v.elem = GgufType(e);
  flags(v.elem, v);
  const uint64_t nat = c.pos();
  const uint64_t n = c.get<uint64_t>(fmt::format("array length of '{}'", key));
  // Each element takes at least its scalar size (a string at least its 8-byte length).
  const uint64_t min_bytes = v.elem == GgufType::String ? 8 : kScalarBytes[e];
  if (n > c.left() / min_bytes)
    c.fail(fmt::format("key '{}': array length {} does not fit in the {} bytes left", key, n,
                       c.left()),
           nat);
  const std::string what = fmt::format("element of '{}'", key);
  if (v.elem == GgufType::String) {
    v.strings.resize(n);
    for (uint64_t i = 0; i < n; ++i) v.strings[i] = c.str(what);
  } else {
    v.numbers.resize(n);
    GgufValue x;
    std::string unused;
    for (uint64_t i = 0; i < n; ++i) {
      read_scalar(c, v.elem, what, x, unused);
      v.numbers[i] = v.is_float ? x.f : double(x.i);
    }
  }
  return v;
}

}  // namespace

const char* gguf_type_name(GgufType t) {
  return known_type(uint32_t(t)) ? kTypeNames[uint32_t(t)] : "?";
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const auto& t : kGgmlTypes)
    if (t.id == id) return &t;
  return nullptr;
}

GgufFile::GgufFile(const std::string& path)
    : GgufFile(path, std::make_unique<MappedFile>(path, "a GGUF file")) {}

GgufFile::GgufFile(const std::string& path, std::unique_ptr<MappedFile> map)
    : path_(path), map_(std::move(map)) {
  base_ = map_->data();
  size_ = map_->size();
  parse();
}

GgufFile::~GgufFile() = default;

void GgufFile::parse() {
  Cursor c(path_, base_, size_);
  if (size_ < 4 || std::memcmp(base_, "GGUF", 4) != 0) c.fail("wrong magic: not a GGUF file", 0);
  c.take(4, "magic");
  version_ = c.get<uint32_t>("version");
  if (version_ != 2 && version_ != 3)
    c.fail(fmt::format("GGUF version {} is not supported (2 and 3 are)", version_), 4);
  const uint64_t n_tensors = c.get<uint64_t>("tensor count");
  const uint64_t n_kv = c.get<uint64_t>("metadata count");
  // A key/value takes at least 8 (key length) + 4 (type) + 1 bytes; a tensor info 8 + 4 + 4 + 8.
  if (n_kv > c.left() / 13)
    c.fail(fmt::format("metadata count {} does not fit in the file", n_kv), 16);
  if (n_tensors > c.left() / 24)
    c.fail(fmt::format("tensor count {} does not fit in the file", n_tensors), 8);
  for (uint64_t i = 0; i < n_kv; ++i) {
    const uint64_t at = c.pos();
    std::string key = c.str(fmt::format("key #{}", i));
    if (kv_.count(key)) c.fail(fmt::format("key '{}' appears twice", key), at);
    GgufValue v = read_value(c, key);
    kv_.emplace(std::move(key), std::move(v));
  }
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32 || a->i == 0 || (a->i & (a->i - 1)) != 0)
      throw Error(fmt::format("{}: general.alignment must be a u32 power of two, is {} {}", path_,
                              gguf_type_name(a->type), a->is_float ? a->f : double(a->i)));
    alignment_ = uint32_t(a->i);
  }
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const uint64_t at = c.pos();
    GgufTensor t;
    t.name = c.str(fmt::format("name of tensor #{}", i));
    const std::string who = fmt::format("tensor '{}'", t.name);
    const uint64_t dat = c.pos();
    const uint32_t nd = c.get<uint32_t>(who + " n_dims");
    if (nd == 0 || nd > 4) c.fail(fmt::format("{}: n_dims {} (1 to 4 allowed)", who, nd), dat);
    std::vector<int64_t> ne(nd);
    uint64_t n = 1;
    for (uint32_t d = 0; d < nd; ++d) {
      const uint64_t x = c.get<uint64_t>(who + " dimension");
      if (x == 0 || x > (uint64_t{1} << 40) || n > (uint64_t{1} << 50) / x)
        c.fail(fmt::format("{}: bad dimension {}", who, x), dat + 4 + 8 * d);
      ne[d] = int64_t(x);
      n *= x;
    }
    const uint64_t tat = c.pos();
    t.type = c.get<uint32_t>(who + " type");
    const GgmlTypeInfo* ti = ggml_type_info(t.type);
    if (!ti) c.fail(fmt::format("{}: unknown ggml type {}", who, t.type), tat);
    if (ne[0] % ti->block != 0)
      c.fail(fmt::format("{}: {} needs the row length ({}) to be a multiple of {}", who, ti->name,
                         ne[0], ti->block),
             tat);
    t.size = n / ti->block * ti->block_bytes;
    const uint64_t oat = c.pos();
    t.offset = c.get<uint64_t>(who + " offset");
    if (t.offset % alignment_ != 0)
      c.fail(fmt::format("{}: offset {} is not a multiple of the alignment {}", who, t.offset,
                         alignment_),
             oat);
    for (const auto& other : tensors_)
      if (other.name == t.name) c.fail(who + " appears twice", at);
    t.shape.assign(ne.rbegin(), ne.rend());
    tensors_.push_back(std::move(t));
  }
  data_offset_ = (c.pos() + alignment_ - 1) / alignment_ * alignment_;
  for (auto& t : tensors_) {
    if (data_offset_ > size_ || t.offset > size_ - data_offset_ ||
        t.size > size_ - data_offset_ - t.offset)
      throw Error(fmt::format(
          "{}: tensor '{}' data [{}, {}) is not within the {}-byte file "
          "(truncated?)",
          path_, t.name, data_offset_ + t.offset, data_offset_ + t.offset + t.size, size_));
    t.data = base_ + data_offset_ + t.offset;
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_.find(std::string(key));
  return it == kv_.end() ? nullptr : &it->second;
}

namespace {
[[noreturn]] void kind_error(const std::string& path, std::string_view key, const GgufValue& v,
                             const char* want) {
  throw Error(
      fmt::format("{}: metadata '{}' is {}, expected {}", path, key, gguf_type_name(v.type), want));
}
bool is_int(const GgufValue& v) {
  return v.type != GgufType::Array && v.type != GgufType::String && !v.is_float &&
         v.type != GgufType::Bool;
}
}  // namespace

std::string GgufFile::str(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw Error(fmt::format("{}: metadata '{}' is missing", path_, key));
  if (v->type != GgufType::String) kind_error(path_, key, *v, "a string");
  return v->s;
}
std::string GgufFile::str(std::string_view key, std::string def) const {
  return find(key) ? str(key) : def;
}
int64_t GgufFile::integer(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw Error(fmt::format("{}: metadata '{}' is missing", path_, key));
  if (!is_int(*v)) kind_error(path_, key, *v, "an integer");
  return v->i;
}
int64_t GgufFile::integer(std::string_view key, int64_t def) const {
  return find(key) ? integer(key) : def;
}
double GgufFile::number(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw Error(fmt::format("{}: metadata '{}' is missing", path_, key));
  if (!is_int(*v) && !v->is_float) kind_error(path_, key, *v, "a number");
  return v->is_float ? v->f : double(v->i);
}
double GgufFile::number(std::string_view key, double def) const {
  return find(key) ? number(key) : def;
}
bool GgufFile::boolean(std::string_view key, bool def) const {
  const GgufValue* v = find(key);
  if (!v) return def;
  if (v->type != GgufType::Bool) kind_error(path_, key, *v, "a bool");
  return v->i != 0;
}
const GgufValue& GgufFile::array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) throw Error(fmt::format("{}: metadata '{}' is missing", path_, key));
  if (v->type != GgufType::Array) kind_error(path_, key, *v, "an array");
  return *v;
}

}  // namespace krafla
