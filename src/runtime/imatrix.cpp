#include "krafla/imatrix.h"

#include <fmt/format.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "krafla/error.h"
#include "krafla/path.h"

namespace krafla {

namespace {

constexpr char kMagic[8] = {'K', 'R', 'A', 'F', 'L', 'A', 'I', 'M'};
constexpr uint32_t kVersion = 1;
constexpr uint32_t kMaxName = 4096;

class Reader {
 public:
  explicit Reader(const std::string& path) : path_(path), f_(path, std::ios::binary) {
    if (!f_) throw Error(fmt::format("{}: cannot open the imatrix file", path));
  }
  template <class T>
  T get(const char* what) {
    T v;
    bytes(&v, sizeof v, what);
    return v;
  }
  void bytes(void* p, size_t n, const std::string& what) {
    f_.read(static_cast<char*>(p), std::streamsize(n));
    if (!f_) throw Error(fmt::format("{}: truncated imatrix file (reading {})", path_, what));
  }
  bool at_end() { return f_.peek() == std::char_traits<char>::eof(); }

 private:
  std::string path_;
  std::ifstream f_;
};

}  // namespace

void Imatrix::add(const std::string& name, const float* x, int64_t cols, int n) {
  Entry& e = entries_[name];
  if (e.sum2.empty()) e.sum2.assign(size_t(cols), 0.0);
  if (int64_t(e.sum2.size()) != cols)
    throw Error(fmt::format("imatrix: matrix '{}' has inputs of {} channels, earlier {}", name,
                            cols, e.sum2.size()));
  for (int t = 0; t < n; ++t)
    for (int64_t c = 0; c < cols; ++c) {
      const double v = x[t * cols + c];
      e.sum2[size_t(c)] += v * v;
    }
  e.rows += n;
}

void Imatrix::merge_file(const std::string& path) {
  Reader r(path);
  char magic[8];
  r.bytes(magic, 8, "the header");
  if (std::memcmp(magic, kMagic, 8) != 0)
    throw Error(fmt::format("{}: not an imatrix file (bad magic)", path));
  const auto version = r.get<uint32_t>("the header");
  if (version != kVersion)
    throw Error(
        fmt::format("{}: imatrix file version {} (this build reads {})", path, version, kVersion));
  const auto n_entries = r.get<uint32_t>("the header");
  const auto tokens = r.get<int64_t>("the header");
  Imatrix in;
  for (uint32_t i = 0; i < n_entries; ++i) {
    const std::string what = fmt::format("entry {} of {}", i + 1, n_entries);
    const auto len = r.get<uint32_t>(what.c_str());
    if (len == 0 || len > kMaxName)
      throw Error(fmt::format("{}: {} has a name of {} bytes", path, what, len));
    std::string name(len, '\0');
    r.bytes(name.data(), len, what);
    const auto cols = r.get<uint32_t>(what.c_str());
    const auto rows = r.get<int64_t>(what.c_str());
    if (cols == 0 || cols > (1u << 24) || rows < 0)
      throw Error(
          fmt::format("{}: {} ('{}') has {} channels and {} rows", path, what, name, cols, rows));
    Entry& e = in.entries_[name];
    e.rows = rows;
    e.sum2.resize(cols);
    r.bytes(e.sum2.data(), size_t(cols) * 8, what + " ('" + name + "')");
  }
  if (!r.at_end()) throw Error(fmt::format("{}: bytes after the last imatrix entry", path));
  for (auto& [name, e] : in.entries_) {
    Entry& mine = entries_[name];
    if (mine.sum2.empty()) mine.sum2.assign(e.sum2.size(), 0.0);
    if (mine.sum2.size() != e.sum2.size())
      throw Error(fmt::format("{}: matrix '{}' has {} channels there, {} here", path, name,
                              e.sum2.size(), mine.sum2.size()));
    for (size_t c = 0; c < e.sum2.size(); ++c) mine.sum2[c] += e.sum2[c];
    mine.rows += e.rows;
  }
  tokens_ += tokens;
}

void Imatrix::save(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) throw Error(fmt::format("{}: cannot write the imatrix file", tmp));
    auto put = [&](const void* p, size_t n) {
      f.write(static_cast<const char*>(p), std::streamsize(n));
    };
    const uint32_t n_entries = uint32_t(entries_.size());
    put(kMagic, 8);
    put(&kVersion, 4);
    put(&n_entries, 4);
    put(&tokens_, 8);
    for (const auto& [name, e] : entries_) {
      const uint32_t len = uint32_t(name.size()), cols = uint32_t(e.sum2.size());
      put(&len, 4);
      put(name.data(), len);
      put(&cols, 4);
      put(&e.rows, 8);
      put(e.sum2.data(), e.sum2.size() * 8);
    }
    f.close();
    if (!f) {
      std::error_code ec;
      std::filesystem::remove(fs_path(tmp), ec);
      throw Error(fmt::format("{}: writing the imatrix file failed (disk full?)", tmp));
    }
  }
  std::filesystem::rename(fs_path(tmp), fs_path(path));
}

}  // namespace krafla
