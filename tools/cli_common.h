// What every executable shares: the CPU guard, the error-to-exit-code rule, small parsers.
#pragma once
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "krafla/kv_type.h"
#include "krafla/model.h"
#include "krafla/sampler.h"

namespace CLI {
class App;
class Validator;
}  // namespace CLI

namespace krafla::cli {

constexpr int kExitBadInput = 2;
constexpr int kExitCpu = 3;

// Sets up the standard streams (console.h), runs the CPU guard (exit 3 naming the missing
// feature), then body(); a krafla::Error or other exception becomes "PROG: error: …" on stderr
// and exit 2 (bad input) or 1.
int run_main(const char* prog, const std::function<int()>& body);

// Adds --version, then parses the arguments (llama.cpp's -sys read as --system). --help and
// --version print and give 0; a parse error prints one line, "PROG: error: … (see --help)",
// and gives 2 (kExitBadInput); nullopt means carry on. Every executable parses through this.
std::optional<int> parse(CLI::App& app, int argc, char** argv, const char* prog);

// --version: "PROG VERSION (commit C; ISA I; COMPILER)".
void add_version_flag(CLI::App& app, const char* prog);
std::string version_line(const char* prog);

// A finite number in [lo, hi]: CLI::Range lets "nan" through (every comparison with it is
// false) and accepts "inf" when hi is infinite.
CLI::Validator finite_range(double lo, double hi);

// The sampling options of ml_run and ml_server, with one set of ranges: --temp, --top-k,
// --top-p, --min-p, --repeat-penalty, --repeat-last-n and -s/--seed. Defaults are p's values;
// p.seed is set to a random seed here and only a given --seed replaces it.
void add_sampling_options(CLI::App& app, SamplerParams& p);
uint64_t random_seed();

// -t/--threads: 0 (all cores) up to four threads per core; more only contend for the cores
// (a thousand threads spin rather than work).
void add_threads_option(CLI::App& app, int& threads);
// --kv f32|f16|q8_0: the KV cache's element type.
void add_kv_option(CLI::App& app, KvType& kv);
// --delta-chunk N (0..256): SessionOptions::delta_chunk, the experimental chunked prefill of
// Qwen3.5's DeltaNet layers.
void add_delta_chunk_option(CLI::App& app, int& chunk);

// "1,2,3" or "1 2 3" → ids; throws krafla::Error naming the bad item.
std::vector<int32_t> parse_ids(const std::string& s);

// Writes a float32 .npy array of the given shape.
void write_npy(const std::string& path, const float* data, const std::vector<int64_t>& shape);

// The whole file, or stdin for "-"; throws krafla::Error naming the path (missing, a directory).
std::string read_file_or_stdin(const std::string& path_or_dash);

double now_seconds();

// --pack-cache DIR, defaulting to $KRAFLA_PACK_CACHE: packed weights are mapped from DIR, or
// packed once and written there (docs/architecture.md).
void add_pack_cache_option(CLI::App& app, std::string& dir);
// Model::load with the pack cache; says on stderr what the cache did.
std::unique_ptr<Model> load_model(const char* prog, const std::string& path, int threads,
                                  const std::string& pack_cache);

}  // namespace krafla::cli
