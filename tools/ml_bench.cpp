// ml_bench: prefill and decode speed, median of repeats, per thread count.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <nlohmann/json.hpp>
#include <random>

#include "cli_common.h"
#include "kernels/kernels.h"
#include "krafla/error.h"
#include "krafla/model.h"
#include "krafla/session.h"

using namespace krafla;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
  int threads;
  double prefill, decode;
};

Result bench(const Model& model, int threads, int n_prompt, int n_gen, int reps, int batch) {
  Session s(model, {threads, n_prompt + n_gen + 1, batch});
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, model.config().n_vocab - 1);
  std::vector<int32_t> prompt(std::max(n_prompt, 1));
  for (auto& t : prompt) t = pick(rng);
  std::vector<double> pf, dc;
  // One untimed warm-up pass pages in the weights and spins up the threads.
  for (int r = -1; r < reps; ++r) {
    s.truncate(0);
    double t0 = cli::now_seconds();
    if (n_prompt > 0) s.eval(prompt);
    double t1 = cli::now_seconds();
    if (n_prompt == 0) s.eval(std::span<const int32_t>(prompt.data(), 1));
    double t2 = cli::now_seconds();
    for (int i = 0; i < n_gen; ++i) {
      const int32_t tok = pick(rng);
      s.eval(std::span<const int32_t>(&tok, 1));
    }
    double t3 = cli::now_seconds();
    if (r < 0) continue;
    if (n_prompt > 0) pf.push_back(n_prompt / (t1 - t0));
    if (n_gen > 0) dc.push_back(n_gen / (t3 - t2));
  }
  return {s.n_threads(), pf.empty() ? 0 : median(pf), dc.empty() ? 0 : median(dc)};
}

}  // namespace

int main(int argc, char** argv) {
  return cli::run_main("ml_bench", [&] {
    std::string path, threads = "1";
    int n_prompt = 128, n_gen = 64, reps = 3, batch = 128;
    bool json = false;
    CLI::App app{"ml_bench: measure prefill and decode speed"};
    app.add_option("-m,--model", path, "model file (.mlb)")->required();
    app.add_option("-p,--n-prompt", n_prompt, "prompt tokens")->capture_default_str()->check(CLI::Range(0, 1 << 20));
    app.add_option("-n,--n-gen", n_gen, "generated tokens")->capture_default_str()->check(CLI::Range(0, 1 << 20));
    app.add_option("-t,--threads", threads, "thread counts, comma-separated")->capture_default_str();
    app.add_option("-r,--repetitions", reps, "repeats (the median is reported)")->capture_default_str()->check(CLI::Range(1, 1000));
    app.add_option("--batch", batch, "prompt tokens per forward step")->capture_default_str()->check(CLI::Range(1, 128));
    std::string pack_cache;
    cli::add_pack_cache_option(app, pack_cache);
    app.add_flag("--json", json, "print one JSON array on stdout");
    cli::add_version_flag(app, "ml_bench");
    if (auto rc = cli::parse(app, argc, argv, "ml_bench")) return *rc;
    const std::vector<int> tlist = cli::parse_int_list(threads, "--threads");
    for (int t : tlist)
      if (t < 1 || t > 1024) throw Error(fmt::format("--threads: {} is out of range", t));
    const double t_load = cli::now_seconds();
    auto model = cli::load_model("ml_bench", path, *std::max_element(tlist.begin(), tlist.end()), pack_cache);
    fmt::print(stderr, "ml_bench: loaded in {:.2f} s\n", cli::now_seconds() - t_load);
    if (n_prompt + n_gen + 1 > model->config().max_ctx)
      throw Error(fmt::format("-p + -n = {} exceeds the model's context {}", n_prompt + n_gen,
                              model->config().max_ctx));
    nlohmann::json out = nlohmann::json::array();
    if (!json) {
      fmt::print("model: {}\nisa: {}\n\n", model->describe(), kernels::isa_name());
      fmt::print("| threads | prefill {:>4} (tok/s) | decode {:>4} (tok/s) |\n", n_prompt, n_gen);
      fmt::print("|--------:|--------------------:|-------------------:|\n");
    }
    for (int t : tlist) {
      const Result r = bench(*model, t, n_prompt, n_gen, reps, batch);
      if (json) {
        out.push_back({{"threads", r.threads}, {"n_prompt", n_prompt}, {"n_gen", n_gen},
                       {"prefill_tok_s", r.prefill}, {"decode_tok_s", r.decode},
                       {"isa", kernels::isa_name()}});
      } else {
        fmt::print("| {:>7} | {:>19.2f} | {:>18.2f} |\n", r.threads, r.prefill, r.decode);
        std::fflush(stdout);
      }
    }
    if (json) fmt::print("{}\n", out.dump());
    return 0;
  });
}
