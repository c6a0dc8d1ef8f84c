#include "run_perplexity.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_common.h"
#include "interrupt.h"
#include "krafla/error.h"
#include "krafla/perplexity.h"
#include "krafla/session.h"

namespace krafla::cli {

namespace {

// Does the tokenizer put BOS at the start of a text (as llama-perplexity then does per chunk)?
int32_t added_bos(const Tokenizer& t) {
  const auto with = t.encode("a", true), without = t.encode("a", false);
  return t.bos_id() >= 0 && with.size() > without.size() && with.front() == t.bos_id() ? t.bos_id()
                                                                                       : -1;
}

std::string eta(double seconds) {
  const int s = int(std::lround(seconds));
  return s >= 3600 ? fmt::format("{}h{:02}m", s / 3600, s / 60 % 60)
                   : fmt::format("{}m{:02}s", s / 60, s % 60);
}

void print_text(const PerplexityResult& r, const PerplexityOptions& o, bool interrupted) {
  fmt::print("perplexity: {} chunks of {} tokens, {} predictions scored{}\n", r.n_chunks, o.n_ctx,
             r.n_scored, interrupted ? " (stopped by Ctrl-C)" : "");
  fmt::print("Final estimate: PPL = {:.4f} +/- {:.5f}\n", r.ppl(), r.ppl_stderr());
  if (!r.has_base) return;
  fmt::print("Mean PPL(base)  : {:.4f}\n", r.ppl_base());
  fmt::print("ln(PPL/PPL base): {:+.6f}\n", std::log(r.ppl() / r.ppl_base()));
  fmt::print("Mean KLD        : {:.6f} +/- {:.6f}\n", r.kl_mean(), r.kl_stderr());
  fmt::print("Median KLD      : {:.6f}\n", r.kl_quantile(0.5));
  fmt::print("90.0% KLD       : {:.6f}\n", r.kl_quantile(0.9));
  fmt::print("99.0% KLD       : {:.6f}\n", r.kl_quantile(0.99));
  fmt::print("Maximum KLD     : {:.6f}\n", r.kl_quantile(1.0));
  fmt::print("Same top p      : {:.3f} %\n", 100.0 * r.top1_agreement());
}

void print_json(const PerplexityResult& r, const PerplexityOptions& o, const std::string& scoring,
                bool interrupted) {
  nlohmann::json j = {
      {"chunks", r.n_chunks},         {"n_ctx", o.n_ctx},
      {"scoring", scoring},           {"first_scored", o.first},
      {"predictions", r.n_scored},    {"ppl", r.ppl()},
      {"ppl_stderr", r.ppl_stderr()}, {"mean_nll", r.sum_nll / std::max<int64_t>(1, r.n_scored)},
      {"seconds", r.seconds},         {"interrupted", interrupted}};
  if (r.has_base)
    j["kl"] = {{"ppl_base", r.ppl_base()},  {"mean", r.kl_mean()},
               {"stderr", r.kl_stderr()},   {"median", r.kl_quantile(0.5)},
               {"p90", r.kl_quantile(0.9)}, {"p99", r.kl_quantile(0.99)},
               {"max", r.kl_quantile(1.0)}, {"top1_agreement", r.top1_agreement()}};
  fmt::print("{}\n", j.dump(2));
}

}  // namespace

int run_perplexity(const Model& model, const PerplexityArgs& a) {
  const std::vector<int32_t> tokens = model.tokenizer().encode(a.text, true);
  PerplexityOptions o;
  o.n_ctx = std::min(a.n_ctx > 0 ? a.n_ctx : 512, model.config().max_ctx);
  o.first = a.scoring == "llama" ? o.n_ctx / 2 : 0;
  o.max_chunks = a.chunks;
  o.bos_id = added_bos(model.tokenizer());
  o.n_batch = a.n_batch;
  (a.kl ? o.kl_base : o.save_base) = a.kl_base;
  check_perplexity(tokens.size(), model.config().n_vocab, o.n_ctx, o);  // refuse before printing
  fmt::print(stderr,
             "perplexity: {} tokens; chunks of {} ({} in the text), each starting with {}; "
             "scoring positions {}..{} of each{}\n",
             tokens.size(), o.n_ctx, tokens.size() / size_t(o.n_ctx),
             o.bos_id >= 0 ? "BOS" : "its own token", o.first, o.n_ctx - 2,
             a.scoring == "llama" ? " (llama-perplexity's rule)" : "");
  Session s(model, {.n_threads = a.n_threads,
                    .n_ctx = o.n_ctx,
                    .n_batch = std::min(a.n_batch, 128),
                    .kv_type = a.kv,
                    .delta_chunk = a.delta_chunk});
  Busy busy;
  Profile prof;
  if (a.profile) s.set_profile(&prof);
  s.set_imatrix(a.imatrix);
  double last_print = -1;
  const PerplexityResult r = perplexity(s, tokens, o, [&](const PerplexityResult& p) {
    const double per_chunk = p.seconds / p.n_chunks;
    if (p.seconds - last_print >= 1.0 || p.n_chunks == p.n_chunks_total) {
      last_print = p.seconds;
      fmt::print(stderr, "perplexity: [{}/{}] PPL {:.4f}, {:.2f} s/chunk, ETA {}\n", p.n_chunks,
                 p.n_chunks_total, p.ppl(), per_chunk,
                 eta(per_chunk * (p.n_chunks_total - p.n_chunks)));
    }
    return !interrupted();
  });
  if (!a.kl_base.empty() && !a.kl)
    fmt::print(stderr, "perplexity: wrote the log-probabilities of {} chunks to {}\n", r.n_chunks,
               a.kl_base);
  if (a.profile) fmt::print(stderr, "{}", prof.table(r.seconds));
  if (a.json)
    print_json(r, o, a.scoring, interrupted());
  else
    print_text(r, o, interrupted());
  return interrupted() ? kExitInterrupted : 0;
}

}  // namespace krafla::cli
