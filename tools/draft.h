// --draft MODEL: speculative decoding with a draft model, for ml_run's completion and chat.
#pragma once
#include <memory>
#include <optional>
#include <string>

#include "krafla/generate.h"
#include "krafla/model.h"
#include "krafla/sampler.h"
#include "krafla/session.h"

namespace CLI {
class App;
}  // namespace CLI

namespace krafla::cli {

struct DraftArgs {
  std::string path;    // "" : no draft model
  int n_draft = 8;     // --draft-max: most tokens drafted per pass
  float p_min = 0.5f;  // --draft-p-min: drafting stops below this confidence
};
// --draft, --draft-max, --draft-p-min.
void add_draft_options(CLI::App& app, DraftArgs& d);

// Loads d.path (null when it is "") and checks that it can draft for `main`: the same
// vocabulary, token for token (krafla::Error naming the first difference otherwise).
std::unique_ptr<Model> load_draft(const char* prog, const DraftArgs& d, const Model& main,
                                  int threads, const std::string& pack_cache);

// "draft: A of D drafted tokens accepted in P passes (…)" (or "lookup: …"), or "" when the
// generation ran no speculative decoding.
std::string speculative_line(const GenerateResult& g);

// The draft model's session and sampler beside one main session (a completion or a chat).
class Drafting {
 public:
  // No-op without a draft model. The draft's context is the main session's; its sampler has
  // the main sampling settings and a seed of its own.
  Drafting(const Model* draft, const DraftArgs& d, const Session& main, const SamplerParams& sp);
  void apply(GenerateOptions& go);  // turns the draft on in go

 private:
  DraftArgs d_;
  std::optional<Session> session_;
  std::optional<Sampler> sampler_;
};

}  // namespace krafla::cli
