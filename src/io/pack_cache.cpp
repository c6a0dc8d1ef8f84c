#include "io/pack_cache.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "io/model_file.h"
#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {
namespace {

constexpr char kMagic[8] = {'K', 'R', 'A', 'F', 'L', 'A', 'P', 'C'};
constexpr uint32_t kVersion = 1;
constexpr uint64_t kHeader = 24;

uint64_t fnv1a(std::string_view s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

uint64_t align64(uint64_t n) { return (n + 63) / 64 * 64; }

// What the cache was made from and for: any difference makes it stale or foreign.
nlohmann::json identity(const ModelFile& model) {
  struct stat st {};
  if (::stat(model.path().c_str(), &st) != 0)
    throw Error(fmt::format("{}: stat failed: {}", model.path(), std::strerror(errno)));
  return {{"format", kVersion},
          {"krafla", KRAFLA_VERSION},
          {"isa", kernels::isa_name()},
          {"row_tile", kernels::row_tile()},
          {"source_size", uint64_t(st.st_size)},
          {"source_mtime_ns", int64_t(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec},
          {"source_meta_hash", fmt::format("{:016x}", fnv1a(model.meta().dump()))}};
}

nlohmann::json entry_json(const PackEntry& e, uint64_t offset) {
  return {{"name", e.name}, {"type", e.type},   {"rows", e.rows},
          {"cols", e.cols}, {"offset", offset}, {"size", e.size}};
}

// The JSON a cache holding `entries` from `model` has, with the data offsets it implies.
nlohmann::json expected_json(const ModelFile& model, const std::vector<PackEntry>& entries,
                             uint64_t data_start, std::vector<uint64_t>* offsets) {
  nlohmann::json j = identity(model);
  j["matrices"] = nlohmann::json::array();
  uint64_t off = data_start;
  for (const auto& e : entries) {
    if (offsets) offsets->push_back(off);
    j["matrices"].push_back(entry_json(e, off));
    off = align64(off + e.size);
  }
  j["file_size"] = off;
  return j;
}

// Why a cache's header is not the one wanted: "foreign" when it was packed for another ISA
// (or is another kind of file), "stale" when its model file or Krafla changed since.
std::string first_difference(const nlohmann::json& have, const nlohmann::json& want) {
  for (const auto& [k, v] : want.items())
    if (!have.contains(k) || have[k] != v) {
      const bool foreign = k == "isa" || k == "row_tile" || !have.contains(k);
      if (k == "matrices") return "stale: the model's matrices differ";
      return fmt::format("{}: {} is {}, expected {}", foreign ? "foreign" : "stale", k,
                         have.contains(k) ? have[k].dump() : "absent", v.dump());
    }
  return "stale: the header differs";
}

// Creates the cache directory's last level only: `--pack-cache /data/cahce/x` (a typo) must
// not quietly build a tree that nobody will find again. A parent that is missing or not a
// directory makes the cache unusable; the caller turns the Error into load_note().
void create_cache_dir(const std::filesystem::path& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  const auto parent = dir.parent_path();
  if (!parent.empty() && !std::filesystem::is_directory(parent, ec))
    throw Error(fmt::format(
        "{}: cannot create the pack cache directory: {} {}", dir.string(), parent.string(),
        std::filesystem::exists(parent, ec) ? "is not a directory" : "does not exist"));
  std::filesystem::create_directory(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec))
    throw Error(fmt::format("{}: cannot create the pack cache directory: {}", dir.string(),
                            ec ? ec.message() : "a file of that name is in the way"));
}

}  // namespace

std::string PackCache::path_for(const std::string& dir, const std::string& model_path) {
  const std::filesystem::path p = std::filesystem::absolute(model_path);
  return (std::filesystem::path(dir) / fmt::format("{}-{:08x}.{}.mlpc", p.filename().string(),
                                                   uint32_t(fnv1a(p.string()) & 0xffffffffu),
                                                   kernels::isa_name()))
      .string();
}

std::unique_ptr<PackCache> PackCache::open(const std::string& path, const ModelFile& model,
                                           const std::vector<PackEntry>& entries,
                                           std::string* why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = errno == ENOENT ? "no cache file yet"
                           : fmt::format("cannot open: {}", std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  const uint64_t size = stat_ok ? uint64_t(st.st_size) : 0;
  char head[kHeader] = {};
  if (!stat_ok || size < kHeader || ::pread(fd, head, kHeader, 0) != ssize_t(kHeader) ||
      std::memcmp(head, kMagic, 8) != 0) {
    ::close(fd);
    *why = "foreign: not a Krafla pack cache (bad magic or truncated header)";
    return nullptr;
  }
  uint32_t version;
  uint64_t json_size;
  std::memcpy(&version, head + 8, 4);
  std::memcpy(&json_size, head + 16, 8);
  if (version != kVersion || json_size > size - kHeader) {
    ::close(fd);
    *why = version != kVersion
               ? fmt::format("stale: cache format {}, this build writes {}", version, kVersion)
               : "foreign: header JSON size past the end of the file";
    return nullptr;
  }
  std::string text(json_size, '\0');
  nlohmann::json have;
  if (::pread(fd, text.data(), json_size, kHeader) != ssize_t(json_size) ||
      (have = nlohmann::json::parse(text, nullptr, false)).is_discarded()) {
    ::close(fd);
    *why = "foreign: unreadable header JSON";
    return nullptr;
  }
  auto cache = std::unique_ptr<PackCache>(new PackCache);
  const nlohmann::json want =
      expected_json(model, entries, align64(kHeader + json_size), &cache->offsets_);
  if (have != want) {
    ::close(fd);
    *why = first_difference(have, want);
    return nullptr;
  }
  if (size != want["file_size"].get<uint64_t>()) {
    ::close(fd);
    *why = fmt::format("foreign: {} bytes, the header promises {}", size, want["file_size"].dump());
    return nullptr;
  }
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *why = fmt::format("cannot map: {}", std::strerror(errno));
    return nullptr;
  }
  cache->base_ = static_cast<const uint8_t*>(p);
  cache->size_ = size;
  return cache;
}

void PackCache::write(const std::string& path, const ModelFile& model,
                      const std::vector<PackEntry>& entries, const std::vector<const void*>& data) {
  // The JSON's size decides the data offsets, which the JSON holds: settle it by iteration
  // (offsets only grow, so this ends after a step or two).
  uint64_t start = align64(kHeader + 2);
  std::string text;
  for (;;) {
    text = expected_json(model, entries, start, nullptr).dump();
    if (align64(kHeader + text.size()) <= start) break;
    start = align64(kHeader + text.size());
  }
  text.resize(start - kHeader, ' ');  // pad the JSON with spaces up to the data
  create_cache_dir(std::filesystem::path(path).parent_path());
  std::error_code ec;
  const std::string tmp = fmt::format("{}.tmp{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out)
      throw Error(fmt::format("{}: cannot write the pack cache: {}", tmp, std::strerror(errno)));
    const uint32_t zero = 0;
    const uint64_t json_size = text.size();
    out.write(kMagic, 8);
    out.write(reinterpret_cast<const char*>(&kVersion), 4);
    out.write(reinterpret_cast<const char*>(&zero), 4);
    out.write(reinterpret_cast<const char*>(&json_size), 8);
    out.write(text.data(), std::streamsize(text.size()));
    static const char pad[64] = {};
    for (size_t i = 0; i < entries.size(); ++i) {
      out.write(static_cast<const char*>(data[i]), std::streamsize(entries[i].size));
      out.write(pad, std::streamsize(align64(entries[i].size) - entries[i].size));
    }
    out.flush();
    if (!out) {
      std::filesystem::remove(tmp, ec);
      throw Error(fmt::format("{}: writing the pack cache failed (disk full?)", tmp));
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot move the pack cache into place: {}", path, ec.message()));
  }
}

PackCache::~PackCache() {
  if (base_) ::munmap(const_cast<uint8_t*>(base_), size_);
}

}  // namespace krafla
