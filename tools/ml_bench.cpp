// ml_bench: prefill (ppN) and decode (tgN) speed in llama-bench's shape: one test per thread
// count × depth × -p value / -n value, mean ± sample stddev of -r repetitions, printed as a
// Markdown table, CSV, JSON or JSON lines.
#include <fmt/chrono.h>
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <ctime>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <thread>

#include "cli_common.h"
#include "krafla/error.h"
#include "krafla/model.h"
#include "krafla/session.h"
#include "krafla/system.h"

using namespace krafla;
using ordered_json = nlohmann::ordered_json;

namespace {

// What the tests are about, for every output row (llama-bench's model_* fields).
struct ModelDesc {
  std::string filename, type, arch, quant;
  uint64_t size = 0, n_params = 0;  // weights only: the tokenizer's `bytes` entries left out
};

// "llama 67M Q4_0": arch, parameter count, and the dtype holding most of the block matrices'
// bytes (the embedding and output are often kept in Q8_0 and would outweigh them).
ModelDesc describe_model(const std::string& path) {
  const ModelFileInfo info = inspect_model_file(path);
  ModelDesc d;
  d.filename = path;
  d.arch = info.config ? info.config->arch : info.kind;
  std::map<std::string, uint64_t> block_bytes;
  for (const auto& t : info.tensors) {
    if (t.dtype == "bytes") continue;
    uint64_t n = 1;
    for (int64_t x : t.shape) n *= uint64_t(x);
    d.n_params += n;
    d.size += t.bytes;
    if (t.name.starts_with("blk.") && t.shape.size() == 2) block_bytes[t.dtype] += t.bytes;
  }
  auto most = std::max_element(block_bytes.begin(), block_bytes.end(),
                               [](const auto& a, const auto& b) { return a.second < b.second; });
  d.quant = most == block_bytes.end() ? "?" : most->first;
  std::transform(d.quant.begin(), d.quant.end(), d.quant.begin(), ::toupper);
  const std::string n = d.n_params >= 1000000000 ? fmt::format("{:.1f}B", d.n_params / 1e9)
                                                 : fmt::format("{:.0f}M", d.n_params / 1e6);
  d.type = fmt::format("{} {} {}", d.arch, n, d.quant);
  return d;
}

struct Test {
  int threads = 1, n_prompt = 0, n_gen = 0, n_depth = 0, batch = 128;
  std::string name() const {  // llama-bench's: pp512, tg128, "pp512 @ d1024"
    std::string s = n_prompt > 0 ? fmt::format("pp{}", n_prompt) : fmt::format("tg{}", n_gen);
    return n_depth > 0 ? fmt::format("{} @ d{}", s, n_depth) : s;
  }
  int n_tokens() const { return n_prompt + n_gen; }
};

struct Result {
  Test test;
  std::string time;                  // when the test started, ISO 8601 UTC
  std::vector<uint64_t> samples_ns;  // one per repetition
  std::vector<double> samples_ts() const {
    std::vector<double> v;
    for (uint64_t ns : samples_ns) v.push_back(1e9 * test.n_tokens() / double(ns));
    return v;
  }
};

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / double(v.size());
}

// Sample standard deviation (n − 1), 0 for a single repetition, as llama-bench reports.
double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / double(v.size() - 1));
}

std::string now_iso() {
  return fmt::format("{:%Y-%m-%dT%H:%M:%SZ}", fmt::gmtime(std::time(nullptr)));  // thread-safe
}

// The tests in llama-bench's order: per thread count and depth, the -p tests then the -n
// tests. A test that does not fit the model's context is shortened to fit, and says so.
std::vector<Test> plan_tests(const std::vector<int>& threads, const std::vector<int>& depths,
                             const std::vector<int>& prompts, const std::vector<int>& gens,
                             int batch, int max_ctx) {
  std::vector<Test> out;
  for (int t : threads)
    for (int d : depths) {
      if (d >= max_ctx)
        throw Error(
            fmt::format("-d {} leaves no room in the model's {}-token context", d, max_ctx));
      auto add = [&](int p, int n) {
        Test x{t, p, n, d, batch};
        const int room = max_ctx - d;
        if (x.n_tokens() > room) {
          const std::string was = x.name();
          (p > 0 ? x.n_prompt : x.n_gen) = room;
          fmt::print(stderr, "ml_bench: {} does not fit the model's {}-token context; running {}\n",
                     was, max_ctx, x.name());
        }
        out.push_back(x);
      };
      for (int p : prompts)
        if (p > 0) add(p, 0);
      for (int n : gens)
        if (n > 0) add(0, n);
    }
  if (out.empty()) throw Error("nothing to measure: every -p and -n value is 0");
  return out;
}

uint64_t elapsed_ns(double t0) { return uint64_t(std::llround((cli::now_seconds() - t0) * 1e9)); }

// ---- --bandwidth: the machine's read bandwidth, and decode as a share of it ----

// Bytes per second that `threads` threads read from `mib` MiB, far more than any cache: each
// reads its slice once per pass in 4 KiB steps (the kernel table's dot product of the step with
// itself: a stream of vector loads), with software prefetch of the lines `ahead` bytes on as the
// decode kernels do, for a few distances (0: none). The best pass of all after an untimed one.
// The buffer is 64-byte aligned: from malloc's 16-byte alignment every 64-byte load straddles
// two cache lines, and one thread read 20-30% less on Zen 5.
double read_bandwidth(int mib, int threads, int reps) {
  constexpr int64_t kStep = 1024;  // floats
  const int64_t n = int64_t(mib) << 18;
  std::vector<float> storage(size_t(n) + 16, 1.0f);
  const float* buf = storage.data();
  buf += (64 - reinterpret_cast<uintptr_t>(buf) % 64) % 64 / sizeof(float);
  const auto read = [&](int64_t a, int64_t b, int64_t ahead) {
    const auto* bytes = reinterpret_cast<const char*>(buf);
    float sum = 0;
    for (int64_t i = a; i < b; i += kStep) {
      const int64_t from = i * 4 + ahead;  // the step's bytes, `ahead` further on
      if (ahead > 0 && from + kStep * 4 <= n * 4)
        for (int64_t l = 0; l < kStep * 4; l += 64) __builtin_prefetch(bytes + from + l);
      sum += krafla::dot_f32(buf + i, buf + i, kStep);
    }
    return sum;
  };
  std::vector<float> sums(static_cast<size_t>(threads), 0.0f);
  double best = 0;
  for (const int64_t ahead : {0, 1024, 2048, 4096}) {
    for (int rep = -1; rep < reps; ++rep) {
      const double t0 = cli::now_seconds();
      std::vector<std::thread> pool;
      for (int i = 0; i < threads; ++i)
        pool.emplace_back([&, i] {
          const int64_t steps = n / kStep;
          sums[size_t(i)] =
              read(steps * i / threads * kStep, steps * (i + 1) / threads * kStep, ahead);
        });
      for (auto& t : pool) t.join();
      const double dt = cli::now_seconds() - t0;
      if (rep >= 0) best = std::max(best, double(n) * sizeof(float) / dt);
    }
  }
  if (!(sums[0] >= 0)) throw Error("read_bandwidth: the buffer did not read back");  // keeps it
  return best;
}

// What one decode step at context position `pos` reads from memory: every packed matrix (the
// output projection included) but the experts it does not use (k of E in a MoE layer), each
// attention layer's keys and values up to `pos` (or its window), and each DeltaNet layer's
// state, read and written back.
double bytes_per_token(const Model& m, KvType kv, double pos) {
  const ModelConfig& c = m.config();
  const double elem = kv == KvType::F32 ? 4 : kv == KvType::F16 ? 2 : 34.0 / 32;
  double bytes = double(m.active_packed_bytes());
  for (const LayerConfig& l : c.layers) {
    if (l.kind == LayerConfig::Kind::Linear) {
      bytes += 2.0 * 4 * c.lin_v_heads * c.lin_k_dim * c.lin_v_dim;
    } else {
      const double seen = l.window > 0 ? std::min(pos, double(l.window)) : pos;
      bytes += seen * 2 * c.n_kv_heads * c.head_dim * elem;
    }
  }
  return bytes;
}

// Decode's memory traffic against the measured bandwidth, for the tgN rows.
struct BandwidthShare {
  double bytes_per_token = 0, bandwidth = 0;  // bytes; bytes per second
  double share(double tokens_per_s) const { return bytes_per_token * tokens_per_s / bandwidth; }
};

// As llama-bench: one untimed warm-up, then per repetition an empty cache, an untimed prefill
// of n_depth tokens, and the timed part: the prompt in --batch steps, or n_gen tokens decoded
// one at a time. Token ids are random (the speed does not depend on them).
Result run_test(Session& s, const Test& t, int reps, int n_vocab, bool progress) {
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, n_vocab - 1);
  const auto tokens = [&](int n) {
    std::vector<int32_t> v(size_t(std::max(n, 1)));
    for (auto& x : v) x = pick(rng);
    return v;
  };
  const auto timed = [&] {
    if (t.n_prompt > 0) {
      s.eval(tokens(t.n_prompt));
      return;
    }
    for (int i = 0; i < t.n_gen; ++i) s.eval(tokens(1));
  };
  Result r{t, now_iso(), {}};
  for (int rep = -1; rep < reps; ++rep) {
    s.truncate(0);
    if (t.n_depth > 0) s.eval(tokens(t.n_depth));
    const double t0 = cli::now_seconds();
    timed();
    if (rep < 0) continue;
    r.samples_ns.push_back(std::max<uint64_t>(elapsed_ns(t0), 1));
    if (progress)
      fmt::print(stderr, "ml_bench: {}, threads {}: repetition {}/{}: {:.2f} t/s\n", t.name(),
                 t.threads, rep + 1, reps, r.samples_ts().back());
  }
  return r;
}

// ---- output: llama-bench's printers (md, csv, json, jsonl) ----

ordered_json result_json(const Result& r, const ModelDesc& m, const std::string& build) {
  std::vector<double> ns(r.samples_ns.begin(), r.samples_ns.end());
  const std::vector<double> ts = r.samples_ts();
  return {{"build", build},
          {"isa", isa_name()},
          {"model_filename", m.filename},
          {"model_type", m.type},
          {"model_arch", m.arch},
          {"model_quant", m.quant},
          {"model_size", m.size},
          {"model_n_params", m.n_params},
          {"n_batch", r.test.batch},
          {"n_threads", r.test.threads},
          {"n_prompt", r.test.n_prompt},
          {"n_gen", r.test.n_gen},
          {"n_depth", r.test.n_depth},
          {"test", r.test.name()},
          {"test_time", r.time},
          {"avg_ns", uint64_t(std::llround(mean(ns)))},
          {"stddev_ns", uint64_t(std::llround(stddev(ns)))},
          {"avg_ts", mean(ts)},
          {"stddev_ts", stddev(ts)},
          {"samples_ns", r.samples_ns},
          {"samples_ts", ts}};
}

std::string csv_cell(const ordered_json& v) {
  std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string human_size(uint64_t bytes) {
  return bytes < (uint64_t{1} << 30) ? fmt::format("{:.2f} MiB", bytes / 1048576.0)
                                     : fmt::format("{:.2f} GiB", bytes / 1073741824.0);
}

std::string human_params(uint64_t n) {
  return n < 1000000000 ? fmt::format("{:.2f} M", n / 1e6) : fmt::format("{:.2f} B", n / 1e9);
}

class Printer {
 public:
  Printer(std::string format, const ModelDesc& m, const std::vector<Test>& tests)
      : format_(std::move(format)), model_(m), build_(cli::version_line("ml_bench")) {
    // Column widths from every value known up front, so the header lines up with the rows
    // (llama-bench's fixed widths, widened where a value is longer).
    widths_ = {std::max<size_t>(30, m.type.size()),
               10,
               10,
               std::max<size_t>(10, std::string(isa_name()).size()),
               7,
               15,
               20};
    for (const auto& t : tests) widths_[5] = std::max(widths_[5], t.name().size());
  }

  void header() {
    if (format_ == "md") {
      row({"model", "size", "params", "isa", "threads", "test", "t/s"});
      std::string sep = "|";
      for (size_t i = 0; i < widths_.size(); ++i)
        sep += fmt::format(" {}{} |", std::string(widths_[i] - 1, '-'), kLeft[i] ? '-' : ':');
      fmt::print("{}\n", sep);
    } else if (format_ == "json") {
      fmt::print("[\n");
    }
  }

  void test(const Result& r, const std::optional<BandwidthShare>& bw = std::nullopt) {
    ordered_json j = result_json(r, model_, build_);
    if (bw) {
      const double ts = j["avg_ts"].get<double>();
      j["bytes_per_token"] = uint64_t(std::llround(bw->bytes_per_token));
      j["read_bandwidth_bs"] = uint64_t(std::llround(bw->bandwidth));
      j["bandwidth_share"] = bw->share(ts);
      notes_.push_back(fmt::format(
          "{}, {} thread{}: {:.1f} MB per token × {:.2f} t/s = {:.2f} GB/s, {:.0f}% of the {:.2f} "
          "GB/s measured",
          r.test.name(), r.test.threads, r.test.threads > 1 ? "s" : "", bw->bytes_per_token / 1e6,
          ts, bw->bytes_per_token * ts / 1e9, 100 * bw->share(ts), bw->bandwidth / 1e9));
    }
    if (format_ == "md") {
      const std::vector<double> ts = r.samples_ts();
      row({model_.type, human_size(model_.size), human_params(model_.n_params), isa_name(),
           std::to_string(r.test.threads), r.test.name(),
           fmt::format("{:.2f} ± {:.2f}", mean(ts), stddev(ts))});
    } else if (format_ == "csv") {
      if (first_) print_csv_header(j);
      std::vector<std::string> cells;
      for (const auto& [k, v] : j.items())
        if (!v.is_array()) cells.push_back(csv_cell(v));
      fmt::print("{}\n", fmt::join(cells, ","));
    } else if (format_ == "json") {
      fmt::print("{}  {}", first_ ? "" : ",\n", j.dump());
    } else {
      fmt::print("{}\n", j.dump());
    }
    first_ = false;
    std::fflush(stdout);
  }

  void footer() {
    if (format_ == "md" && !notes_.empty())
      fmt::print("\ndecode as a share of the read bandwidth:\n{}\n", fmt::join(notes_, "\n"));
    if (format_ == "md") fmt::print("\nbuild: {}\n", build_);
    if (format_ == "json") fmt::print("{}]\n", first_ ? "" : "\n");
  }

 private:
  static constexpr bool kLeft[7] = {true, false, false, true, false, false, false};

  void row(const std::vector<std::string>& cells) {
    std::string line = "|";
    for (size_t i = 0; i < cells.size(); ++i)
      line += kLeft[i] ? fmt::format(" {:<{}} |", cells[i], widths_[i])
                       : fmt::format(" {:>{}} |", cells[i], widths_[i]);
    fmt::print("{}\n", line);
  }

  void print_csv_header(const ordered_json& j) {
    std::vector<std::string> keys;
    for (const auto& [k, v] : j.items())
      if (!v.is_array()) keys.push_back(k);  // samples only in JSON, as llama-bench
    fmt::print("{}\n", fmt::join(keys, ","));
  }

  std::string format_;
  ModelDesc model_;
  std::string build_;
  std::vector<size_t> widths_;
  std::vector<std::string> notes_;  // md: one line per tg test with --bandwidth
  bool first_ = true;
};

}  // namespace

int main(int argc, char** argv) {
  return cli::run_main("ml_bench", [&] {
    std::string path, output = "md", pack_cache;
    std::vector<int> n_prompt{512}, n_gen{128}, n_depth{0};
    std::vector<int> threads{int(std::max(1u, std::thread::hardware_concurrency()))};
    int reps = 5, batch = 128, delta_chunk = 0;
    KvType kv = KvType::F32;
    bool json = false, progress = false;
    int bandwidth_mib = 0;
    CLI::App app{"ml_bench: prefill (ppN) and decode (tgN) speed, as llama-bench measures it"};
    app.add_option("-m,--model", path, "model file (.mlb)")->required();
    const auto token_counts = [&](const char* name, std::vector<int>& v, const char* what) {
      app.add_option(name, v, what)
          ->delimiter(',')
          ->capture_default_str()
          ->check(CLI::Range(0, 1 << 20));
    };
    token_counts("-p,--n-prompt", n_prompt, "prompt lengths, comma-separated (0: no pp test)");
    token_counts("-n,--n-gen", n_gen, "generated token counts, comma-separated (0: no tg test)");
    token_counts("-d,--n-depth", n_depth, "tokens already in the cache before each test");
    app.add_option("-t,--threads", threads, "thread counts, comma-separated (default: all cores)")
        ->delimiter(',')
        ->check(CLI::Range(1, 1024));
    app.add_option("-r,--repetitions", reps, "repetitions of each test")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    app.add_option("-b,--batch", batch, "prompt tokens per forward step")
        ->capture_default_str()
        ->check(CLI::Range(1, 128));
    auto* out_opt = app.add_option("-o,--output", output, "output format")
                        ->capture_default_str()
                        ->check(CLI::IsMember({"md", "csv", "json", "jsonl"}));
    app.add_flag("--json", json, "the same as -o json")->excludes(out_opt);
    cli::add_kv_option(app, kv);
    cli::add_delta_chunk_option(app, delta_chunk);
    app.add_flag("--progress", progress, "print every repetition's speed on stderr");
    app.add_option("--bandwidth", bandwidth_mib,
                   "measure the read bandwidth with a buffer of this many MiB (e.g. 1024; 0: "
                   "not) and report decode's memory traffic as a share of it")
        ->check(CLI::Range(0, 1 << 20))
        ->expected(0, 1)
        ->default_str("1024");
    cli::add_pack_cache_option(app, pack_cache);
    if (auto rc = cli::parse(app, argc, argv, "ml_bench")) return *rc;
    if (json) output = "json";

    const double t_load = cli::now_seconds();
    auto model = cli::load_model("ml_bench", path,
                                 *std::max_element(threads.begin(), threads.end()), pack_cache);
    fmt::print(stderr, "ml_bench: loaded in {:.2f} s\n", cli::now_seconds() - t_load);
    const ModelConfig& c = model->config();
    const std::vector<Test> tests = plan_tests(threads, n_depth, n_prompt, n_gen, batch, c.max_ctx);
    std::map<int, double> bandwidth;  // by thread count
    if (bandwidth_mib > 0) {
      for (int t : threads) {
        bandwidth[t] = read_bandwidth(bandwidth_mib, t, 5);
        fmt::print(stderr, "ml_bench: read bandwidth, {} MiB buffer, {} thread{}: {:.2f} GB/s\n",
                   bandwidth_mib, t, t > 1 ? "s" : "", bandwidth[t] / 1e9);
      }
    }
    Printer printer(output, describe_model(path), tests);
    printer.header();
    for (size_t i = 0; i < tests.size(); ++i) {
      const Test& t = tests[i];
      fmt::print(stderr, "ml_bench: test {}/{}: {}, threads {}, {} repetitions\n", i + 1,
                 tests.size(), t.name(), t.threads, reps);
      Session s(*model, {.n_threads = t.threads,
                         .n_ctx = t.n_depth + t.n_tokens(),
                         .n_batch = t.batch,
                         .kv_type = kv,
                         .delta_chunk = delta_chunk});
      std::optional<BandwidthShare> bw;
      if (bandwidth_mib > 0 && t.n_gen > 0)  // the mean position of the decoded tokens
        bw = BandwidthShare{bytes_per_token(*model, kv, t.n_depth + (t.n_gen + 1) / 2.0),
                            bandwidth[t.threads]};
      printer.test(run_test(s, t, reps, c.n_vocab, progress), bw);
    }
    printer.footer();
    return 0;
  });
}
