#include "io/pack_cache.h"

#include <fmt/format.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "io/mapped_file.h"
#include "io/model_file.h"
#include "kernels/kernels.h"
#include "krafla/error.h"
#include "krafla/json_depth.h"
#include "krafla/path.h"

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
// The modification time is std::filesystem's, in nanoseconds since 1970: on Linux exactly
// stat's st_mtim, on Windows (MinGW's libstdc++) whole seconds.
nlohmann::json identity(const ModelFile& model) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path source = fs_path(model.path());
  const uint64_t size = fs::file_size(source, ec);
  const fs::file_time_type mtime = ec ? fs::file_time_type() : fs::last_write_time(source, ec);
  if (ec) throw Error(fmt::format("{}: stat failed: {}", model.path(), ec.message()));
  const auto mtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
      std::chrono::file_clock::to_sys(mtime).time_since_epoch());
  return {{"format", kVersion},
          {"krafla", KRAFLA_VERSION},
          {"isa", kernels::isa_name()},
          {"row_tile", kernels::row_tile()},
          {"source_size", size},
          {"source_mtime_ns", int64_t(mtime_ns.count())},
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
        "{}: cannot create the pack cache directory: {} {}", utf8_string(dir), utf8_string(parent),
        std::filesystem::exists(parent, ec) ? "is not a directory" : "does not exist"));
  std::filesystem::create_directory(dir, ec);
  if (ec || !std::filesystem::is_directory(dir, ec))
    throw Error(fmt::format("{}: cannot create the pack cache directory: {}", utf8_string(dir),
                            ec ? ec.message() : "a file of that name is in the way"));
}

}  // namespace

std::string PackCache::path_for(const std::string& dir, const std::string& model_path) {
  const std::filesystem::path p = std::filesystem::absolute(fs_path(model_path));
  return utf8_string(
      fs_path(dir) /
      fs_path(fmt::format("{}-{:08x}.{}.mlpc", utf8_string(p.filename()),
                          uint32_t(fnv1a(utf8_string(p)) & 0xffffffffu), kernels::isa_name())));
}

std::unique_ptr<PackCache> PackCache::open(const std::string& path, const ModelFile& model,
                                           const std::vector<PackEntry>& entries,
                                           std::string* why) {
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(fs_path(path), ec);
  if (ec) {
    *why = ec == std::errc::no_such_file_or_directory
               ? "no cache file yet"
               : fmt::format("cannot open: {}", ec.message());
    return nullptr;
  }
  if (size < kHeader) {
    *why = "foreign: not a Krafla pack cache (bad magic or truncated header)";
    return nullptr;
  }
  // Mapped before the header is checked: a mapping costs no reads, and MappedFile is the one
  // place that knows how to map a file on each platform.
  std::unique_ptr<MappedFile> map;
  try {
    map = std::make_unique<MappedFile>(path, "a Krafla pack cache");
  } catch (const Error& e) {
    *why = fmt::format("cannot map: {}", e.what());
    return nullptr;
  }
  const uint8_t* head = map->data();
  if (map->size() != size || std::memcmp(head, kMagic, 8) != 0) {
    *why = "foreign: not a Krafla pack cache (bad magic or truncated header)";
    return nullptr;
  }
  uint32_t version;
  uint64_t json_size;
  std::memcpy(&version, head + 8, 4);
  std::memcpy(&json_size, head + 16, 8);
  if (version != kVersion || json_size > size - kHeader) {
    *why = version != kVersion
               ? fmt::format("stale: cache format {}, this build writes {}", version, kVersion)
               : "foreign: header JSON size past the end of the file";
    return nullptr;
  }
  const auto* text = reinterpret_cast<const char*>(head + kHeader);
  const nlohmann::json have = json_depth_ok({text, size_t(json_size)})
                                  ? nlohmann::json::parse(text, text + json_size, nullptr, false)
                                  : nlohmann::json(nlohmann::json::value_t::discarded);
  if (have.is_discarded()) {
    *why = "foreign: unreadable header JSON";
    return nullptr;
  }
  auto cache = std::unique_ptr<PackCache>(new PackCache);
  const nlohmann::json want =
      expected_json(model, entries, align64(kHeader + json_size), &cache->offsets_);
  if (have != want) {
    *why = first_difference(have, want);
    return nullptr;
  }
  if (size != want["file_size"].get<uint64_t>()) {
    *why = fmt::format("foreign: {} bytes, the header promises {}", size, want["file_size"].dump());
    return nullptr;
  }
  cache->base_ = map->data();
  cache->size_ = size;
  cache->map_ = std::move(map);
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
  create_cache_dir(fs_path(path).parent_path());
  std::error_code ec;
  // A name of its own per writer, so that two processes packing the same model at once do not
  // write into one temporary file (the last rename wins; both files are whole).
  const std::string tmp = fmt::format("{}.tmp{:08x}", path, std::random_device{}());
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
      std::filesystem::remove(fs_path(tmp), ec);
      throw Error(fmt::format("{}: writing the pack cache failed (disk full?)", tmp));
    }
  }
  // Windows refuses to replace a file that another process has mapped (an ml_server using the
  // old cache); the caller then keeps the weights it packed and says so.
  std::filesystem::rename(fs_path(tmp), fs_path(path), ec);
  if (ec) {
    const std::string reason = ec.message();  // before remove() overwrites ec
    std::filesystem::remove(fs_path(tmp), ec);
    throw Error(fmt::format("{}: cannot move the pack cache into place: {}", path, reason));
  }
}

PackCache::~PackCache() = default;

}  // namespace krafla
