#include "draft.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>

#include "cli_common.h"
#include "krafla/error.h"

namespace krafla::cli {

void add_draft_options(CLI::App& app, DraftArgs& d) {
  auto* draft = app.add_option("--draft", d.path,
                               "speculative decoding with this draft model (.mlb; the same "
                               "tokenizer, far smaller): it drafts tokens the model checks in one "
                               "pass (the same text at --temp 0, the same distribution when "
                               "sampling; not for Qwen3.5)");
  app.add_option("--draft-max", d.n_draft, "--draft: most tokens drafted per pass")
      ->capture_default_str()
      ->check(CLI::Range(1, 64))
      ->needs(draft);
  app.add_option("--draft-p-min", d.p_min,
                 "--draft: stop drafting when the draft model's probability of its token is "
                 "below this")
      ->capture_default_str()
      ->check(finite_range(0.0, 1.0))
      ->needs(draft);
}

std::unique_ptr<Model> load_draft(const char* prog, const DraftArgs& d, const Model& main,
                                  int threads, const std::string& pack_cache) {
  if (d.path.empty()) return nullptr;
  auto m = load_model(prog, d.path, threads, pack_cache);
  const Tokenizer &a = main.tokenizer(), &b = m->tokenizer();
  if (a.vocab_size() != b.vocab_size() || main.config().n_vocab != m->config().n_vocab)
    throw Error(
        fmt::format("--draft {}: its vocabulary has {} tokens, the model's {}: the "
                    "draft model needs the same tokenizer",
                    d.path, b.vocab_size(), a.vocab_size()));
  for (int32_t id = 0; id < a.vocab_size(); ++id)
    if (a.token_text(id) != b.token_text(id))
      throw Error(
          fmt::format("--draft {}: token {} is {:?} there but {:?} in the model: the "
                      "draft model needs the same tokenizer",
                      d.path, id, b.token_text(id), a.token_text(id)));
  if (m->config().has_linear() || main.config().has_linear())
    fmt::print(stderr,
               "{}: --draft is off: a model with DeltaNet layers cannot cut its state back past "
               "a rejected draft\n",
               prog);
  return m;
}

std::string speculative_line(const GenerateResult& g) {
  if (g.speculative.empty()) return "";
  return fmt::format(
      "{}: {} of {} drafted tokens accepted in {} passes ({:.2f} tokens per pass "
      "with a draft)",
      g.speculative, g.n_accepted, g.n_drafted, g.n_passes,
      1.0 + double(g.n_accepted) / std::max(g.n_passes, 1));
}

Drafting::Drafting(const Model* draft, const DraftArgs& d, const Session& main,
                   const SamplerParams& sp)
    : d_(d) {
  if (!draft) return;
  session_.emplace(*draft, draft_session_options(*draft, main, "--draft " + d.path));
  sampler_.emplace(draft_sampler_params(sp));
}

void Drafting::apply(GenerateOptions& go) {
  if (!session_) return;
  go.draft_session = &*session_;
  go.draft_sampler = &*sampler_;
  go.n_draft = d_.n_draft;
  go.draft_p_min = d_.p_min;
}

}  // namespace krafla::cli
