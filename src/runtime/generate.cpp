#include "krafla/generate.h"

#include <algorithm>
#include <chrono>

#include "krafla/chat.h"

namespace krafla {

GenerateResult generate(Session& session, Sampler& sampler, const GenerateOptions& opts,
                        const std::function<bool(int32_t, const std::string&)>& on_text) {
  const auto t0 = std::chrono::steady_clock::now();
  GenerateResult r;
  const Tokenizer& tok = session.model().tokenizer();
  Tokenizer::StreamDecoder dec(tok, opts.skip_special);
  for (;;) {
    if (opts.max_tokens >= 0 && r.n_tokens >= opts.max_tokens) {
      r.finish_reason = "length";
      break;
    }
    int32_t id;
    {
      const ProfileScope scope(session.profile(), Op::Sampling);
      id = sampler.sample(session.logits(), session.history());
    }
    if (std::find(opts.stop_ids.begin(), opts.stop_ids.end(), id) != opts.stop_ids.end()) {
      r.finish_reason = "stop";
      break;
    }
    ++r.n_tokens;
    r.tokens.push_back(id);
    if (!on_text(id, dec.push(id))) {
      r.finish_reason = "cancelled";
      break;
    }
    if (session.n_past() >= session.n_ctx()) {
      r.finish_reason = "context";
      break;
    }
    session.eval(std::span<const int32_t>(&id, 1));
  }
  if (std::string rest = dec.flush(); !rest.empty()) on_text(-1, rest);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<int32_t> stop_ids_for(const Model& model, const std::string& name) {
  std::vector<int32_t> ids(model.config().eos_ids.begin(), model.config().eos_ids.end());
  if (model.tokenizer().eos_id() >= 0) ids.push_back(model.tokenizer().eos_id());
  if (!name.empty())
    for (const auto& s : chat_template(name).stop_tokens)
      if (auto id = model.tokenizer().token_id(s)) ids.push_back(*id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

}  // namespace krafla
