// The pack cache (--pack-cache DIR): a model's weight matrices as this build's kernels pack them,
// written once per model file and ISA, then memory-mapped on later starts instead of being packed
// again (and shared through the page cache by every process that maps it).
//
// File DIR/<model file name>-<hash of its absolute path>.<isa>.mlpc: the magic "KRAFLAPC", a
// uint32 version, a uint32 zero, a uint64 JSON size, the JSON (what was packed and from what),
// then each matrix's packed bytes, 64-byte aligned. The JSON names the cache format, the Krafla
// version, the ISA and its row tile, the source file's size, modification time and a hash of its
// metadata, and every matrix (name, type, rows, cols, offset, size): a cache that differs in any
// of these is stale or foreign and is rewritten; a truncated or corrupt one likewise.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace krafla {

class MappedFile;
class ModelFile;

struct PackEntry {
  std::string name;
  int type = 0;  // kernels::WType
  int64_t rows = 0, cols = 0;
  uint64_t size = 0;  // packed bytes
};

class PackCache {
 public:
  // The cache file for `model` in `dir`.
  static std::string path_for(const std::string& dir, const std::string& model_path);

  // Maps `path` if it holds exactly `entries` packed for this build from `model`; otherwise
  // returns nullptr and says why in *why ("no cache file", "stale: ...", "foreign: ...").
  static std::unique_ptr<PackCache> open(const std::string& path, const ModelFile& model,
                                         const std::vector<PackEntry>& entries, std::string* why);

  // Writes the cache atomically (a temporary file renamed into place), creating `path`'s
  // directory if missing, but not its parents. Throws krafla::Error naming the path on failure
  // (a missing parent included).
  static void write(const std::string& path, const ModelFile& model,
                    const std::vector<PackEntry>& entries, const std::vector<const void*>& data);

  ~PackCache();
  PackCache(const PackCache&) = delete;
  PackCache& operator=(const PackCache&) = delete;
  const uint8_t* data(size_t i) const { return base_ + offsets_[i]; }
  uint64_t file_size() const { return size_; }

 private:
  PackCache() = default;
  std::unique_ptr<MappedFile> map_;
  const uint8_t* base_ = nullptr;
  uint64_t size_ = 0;
  std::vector<uint64_t> offsets_;
};

}  // namespace krafla
