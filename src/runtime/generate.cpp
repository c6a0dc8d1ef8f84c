#include "krafla/generate.h"

#include <algorithm>
#include <chrono>

#include "krafla/chat.h"

namespace krafla {

std::vector<int32_t> lookup_draft(std::span<const int32_t> tokens, int max_ngram, int n_draft) {
  const auto n = int64_t(tokens.size());
  for (int64_t g = std::min<int64_t>(max_ngram, n - 1); g >= 1; --g) {
    const auto tail = tokens.subspan(size_t(n - g));
    // The latest earlier place where the last g tokens stand, with at least one token after.
    for (int64_t at = n - g - 1; at >= 0; --at) {
      if (!std::equal(tail.begin(), tail.end(), tokens.begin() + at)) continue;
      const int64_t from = at + g, to = std::min(n, from + n_draft);
      return {tokens.begin() + from, tokens.begin() + to};
    }
  }
  return {};
}

namespace {

bool is_stop(const GenerateOptions& opts, int32_t id) {
  return std::find(opts.stop_ids.begin(), opts.stop_ids.end(), id) != opts.stop_ids.end();
}

}  // namespace

GenerateResult generate(Session& session, Sampler& sampler, const GenerateOptions& opts,
                        const std::function<bool(int32_t, const std::string&)>& on_text) {
  const auto t0 = std::chrono::steady_clock::now();
  GenerateResult r;
  const Tokenizer& tok = session.model().tokenizer();
  Tokenizer::StreamDecoder dec(tok, opts.skip_special);
  // Prompt lookup needs the cache cut back past rejected drafts: not for DeltaNet models.
  const bool lookup = opts.lookup > 0 && !session.model().config().has_linear();
  r.lookup = lookup;
  const int n_vocab = session.model().config().n_vocab;
  std::vector<int32_t> hist(session.history());  // what the cache holds once `id` is fed
  std::vector<float> rows;                       // [1 + drafted, n_vocab] logits
  std::vector<int32_t> draft;
  size_t row = 0;  // the logits the next token is sampled from: a row of `rows`, or logits()
  const auto next_logits = [&]() -> std::span<const float> {
    if (rows.empty()) return session.logits();
    return std::span<const float>(rows).subspan(row * size_t(n_vocab), size_t(n_vocab));
  };
  for (;;) {
    if (opts.max_tokens >= 0 && r.n_tokens >= opts.max_tokens) {
      r.finish_reason = "length";
      break;
    }
    int32_t id;
    {
      const ProfileScope scope(session.profile(), Op::Sampling);
      id = sampler.sample(next_logits(), hist);
    }
    // Drafted tokens after `row` were evaluated ahead: the one sampled now either is the next
    // of them (accepted: its logits are the next row) or ends them (the cache is cut back).
    if (!rows.empty()) {
      if (row < draft.size() && draft[row] == id) {  // `row` drafts accepted so far
        ++r.n_accepted;
        ++row;
      } else {
        session.truncate(int(hist.size()));
        rows.clear();
      }
    }
    if (is_stop(opts, id)) {
      r.finish_reason = "stop";
      break;
    }
    ++r.n_tokens;
    r.tokens.push_back(id);
    if (!on_text(id, dec.push(id))) {
      r.finish_reason = "cancelled";
      break;
    }
    if (int(hist.size()) >= session.n_ctx()) {
      r.finish_reason = "context";
      break;
    }
    hist.push_back(id);
    if (!rows.empty()) continue;  // evaluated with the drafts of this pass
    // Plain decoding evaluates `id`; with lookup, drafts follow it in the same pass.
    draft.clear();
    if (lookup) {
      const int room = session.n_ctx() - int(hist.size());
      draft = lookup_draft(hist, opts.lookup_ngram, std::min(opts.lookup, room));
    }
    std::vector<int32_t> pass{id};
    pass.insert(pass.end(), draft.begin(), draft.end());
    if (draft.empty()) {
      session.eval(pass);
    } else {
      session.eval(pass, &rows);
      row = 0;
      ++r.n_passes;
      r.n_drafted += int(draft.size());
    }
  }
  // As plain decoding leaves it: the cache holds the turn, no drafts evaluated ahead.
  if (!rows.empty()) session.truncate(int(hist.size()));
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
