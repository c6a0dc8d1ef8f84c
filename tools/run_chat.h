// ml_run's chat: the interactive loop (line editing, slash commands, Ctrl-C, a context that
// drops its oldest exchanges when full) and the one-shot chat (`--chat NAME -p TEXT`).
#pragma once
#include <string>
#include <vector>

#include "draft.h"
#include "krafla/model.h"
#include "krafla/sampler.h"
#include "krafla/session.h"

namespace krafla::cli {

struct ChatOptions {
  std::string template_name;  // a name chat_template() knows (auto already resolved)
  std::string system;         // "" for none
  bool hide_think = false;    // --think hide
  int n_predict = -1;         // tokens per reply; -1: until the turn ends
  SamplerParams sampling;
  std::vector<std::string> stops;  // stop strings (-r/--stop)
  bool ignore_eos = false;
  int lookup = 0;                // prompt-lookup draft tokens per pass (--lookup; 0: off)
  const Model* draft = nullptr;  // --draft's model, or null
  DraftArgs draft_args;
  bool verbose = false;      // speed after every reply
  std::string history_path;  // line-editor history file ("" for none)
};

// Reads turns until end of input, /bye, or Ctrl-C at an empty prompt. Returns the exit code.
int chat_interactive(const Model& model, const SessionOptions& so, ChatOptions opts);
// One user message, one reply on stdout, then exit (as `ollama run MODEL "TEXT"`); 130 when
// Ctrl-C cut the reply.
int chat_once(const Model& model, const SessionOptions& so, ChatOptions opts,
              const std::string& text);

}  // namespace krafla::cli
