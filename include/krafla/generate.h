// The decode loop shared by ml_run, the chat mode and ml_server.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "krafla/sampler.h"
#include "krafla/session.h"

namespace krafla {

struct GenerateOptions {
  int max_tokens = -1;            // < 0: until a stop token or the context is full
  std::vector<int32_t> stop_ids;  // sampling one of these ends the turn (not emitted)
  bool skip_special = true;       // hide special tokens from the text
};

struct GenerateResult {
  int n_tokens = 0;           // tokens sampled (stop token not counted)
  std::string finish_reason;  // "stop", "length", "context" or "cancelled"
  double seconds = 0;         // wall time of the loop
  std::vector<int32_t> tokens;
};

// Precondition: session.logits() are the last prompt token's logits. For every sampled token,
// on_text(id, text) receives the text it completes (valid UTF-8, possibly empty); returning
// false cancels. The sampled tokens are fed back so the session holds the whole turn, except
// the final one when the loop ends by length.
GenerateResult generate(Session& session, Sampler& sampler, const GenerateOptions& opts,
                        const std::function<bool(int32_t, const std::string&)>& on_text);

// The stop ids for a model: its eos ids plus those of the named chat template's stop tokens.
std::vector<int32_t> stop_ids_for(const Model& model, const std::string& chat_template_name);

}  // namespace krafla
