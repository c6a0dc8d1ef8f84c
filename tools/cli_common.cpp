#include "cli_common.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <new>
#include <sstream>

#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla::cli {

int run_main(const char* prog, const std::function<int()>& body) {
  if (const char* missing = kernels::missing_cpu_feature()) {
    fmt::print(stderr,
               "{}: error: this CPU lacks {}, which this {} build of Krafla needs; use a build "
               "for an older ISA level (scripts/detect_isa.sh names the best one here)\n",
               prog, missing, kernels::isa_name());
    return kExitCpu;
  }
  try {
    return body();
  } catch (const Error& e) {
    fmt::print(stderr, "{}: error: {}\n", prog, e.what());
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    fmt::print(stderr, "{}: error: out of memory (try a smaller --ctx or model)\n", prog);
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", prog, e.what());
    return 1;
  }
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  std::string item;
  std::istringstream in(s);
  const auto flush = [&] {
    if (item.empty()) return;
    size_t used = 0;
    long long v = 0;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || v < 0 || v > INT32_MAX)
      throw Error(fmt::format("bad token id '{}' (item {} of the list)", item, ids.size() + 1));
    ids.push_back(int32_t(v));
    item.clear();
  };
  for (char c : s) {
    if (c == ',' || c == ' ' || c == '\n' || c == '\t')
      flush();
    else
      item += c;
  }
  flush();
  return ids;
}

std::vector<int> parse_int_list(const std::string& s, const char* what) {
  std::vector<int> out;
  for (int32_t v : parse_ids(s)) out.push_back(v);
  if (out.empty()) throw Error(fmt::format("{}: empty list", what));
  return out;
}

void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape) {
  std::string dims;
  size_t n = 1;
  for (int64_t d : shape) {
    dims += fmt::format("{}, ", d);
    n *= size_t(d);
  }
  if (shape.size() > 1) dims.resize(dims.size() - 2);
  std::string header = fmt::format("{{'descr': '<f4', 'fortran_order': False, 'shape': ({}), }}", dims);
  while ((10 + header.size() + 1) % 64 != 0) header += ' ';
  header += '\n';
  std::ofstream f(path, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open for writing", path));
  const uint16_t hlen = uint16_t(header.size());
  f.write("\x93NUMPY\x01\x00", 8);
  f.write(reinterpret_cast<const char*>(&hlen), 2);
  f << header;
  f.write(reinterpret_cast<const char*>(data), std::streamsize(n * sizeof(float)));
  if (!f) throw Error(fmt::format("{}: write failed", path));
}

std::string read_file_or_stdin(const std::string& p) {
  if (p == "-") return {std::istreambuf_iterator<char>(std::cin), {}};
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error(fmt::format("{}: cannot open", p));
  return {std::istreambuf_iterator<char>(f), {}};
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void add_pack_cache_option(CLI::App& app, std::string& dir) {
  if (const char* env = std::getenv("KRAFLA_PACK_CACHE")) dir = env;
  app.add_option("--pack-cache", dir,
                 "directory of packed-weight caches: map the weights packed on an earlier start "
                 "instead of packing again (default $KRAFLA_PACK_CACHE)");
}

std::unique_ptr<Model> load_model(const char* prog, const std::string& path, int threads,
                                  const std::string& pack_cache) {
  auto m = Model::load(path, LoadOptions{threads, pack_cache});
  if (!m->load_note().empty()) fmt::print(stderr, "{}: {}\n", prog, m->load_note());
  return m;
}

}  // namespace krafla::cli
