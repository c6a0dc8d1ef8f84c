#include "krafla/generate.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "kernels/kernels.h"
#include "krafla/chat.h"
#include "krafla/error.h"

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

SessionOptions draft_session_options(const Model& draft, const Session& main,
                                     std::string_view name) {
  if (main.n_ctx() > draft.config().max_ctx)
    throw Error(
        fmt::format("{}: its context is at most {} tokens, less than the model's {} "
                    "(lower --ctx)",
                    name, draft.config().max_ctx, main.n_ctx()));
  SessionOptions so{main.n_threads(), main.n_ctx(), main.n_batch(), main.kv_type(), main.n_seqs()};
  so.share_threads = &main;  // used from one thread, one session at a time
  return so;
}

SamplerParams draft_sampler_params(SamplerParams main) {
  main.seed ^= 0x9E3779B97F4A7C15ull;
  return main;
}

Drafter::Drafter(Session& s, Sampler& sampler, float p_min, int seq)
    : s_(s), sampler_(sampler), p_min_(p_min), seq_(seq) {}

std::vector<int32_t> Drafter::draw(std::span<const int32_t> hist, int n) {
  Drafter* self = this;
  return draw_all(std::span<Drafter* const>(&self, 1),
                  std::span<const std::span<const int32_t>>(&hist, 1), std::span<const int>(&n, 1))
      .front();
}

std::vector<std::vector<int32_t>> Drafter::draw_all(std::span<Drafter* const> drafters,
                                                    std::span<const std::span<const int32_t>> hists,
                                                    std::span<const int> n) {
  const size_t m = drafters.size();
  std::vector<std::vector<int32_t>> out(m), recent(m);
  if (m == 0) return out;
  Session& s = drafters[0]->s_;
  std::vector<SeqTokens> work;
  std::vector<int32_t> next(m);
  std::vector<char> drafting(m, 0);
  for (size_t i = 0; i < m; ++i) {
    Drafter& d = *drafters[i];
    if (&d.s_ != &s) throw Error("internal: drafters of different sessions drawn together");
    d.q_.clear();
    if (n[i] <= 0 || hists[i].empty()) continue;
    // Keep what the sequence shares with hist (not the last token: its logits are needed).
    const std::span<const int32_t> hist = hists[i];
    const int keep = std::min(s.shared_prefix(hist, d.seq_), int(hist.size()) - 1);
    s.truncate(keep, d.seq_);
    work.push_back({d.seq_, hist.subspan(size_t(keep))});
    recent[i].assign(hist.begin(), hist.end());
    drafting[i] = 1;
  }
  while (!work.empty()) {
    s.eval_batch(work);
    work.clear();
    for (size_t i = 0; i < m; ++i) {
      if (!drafting[i]) continue;
      Drafter& d = *drafters[i];
      const std::vector<float>& logits = s.logits(d.seq_);
      std::vector<TokenProb> q = d.sampler_.probabilities(logits, recent[i]);
      const int32_t x = d.sampler_.draw(q);
      // 0: no softmax to pay
      if (d.p_min_ > 0 && d.own_probability(logits, x) < d.p_min_) {
        drafting[i] = 0;
        continue;
      }
      out[i].push_back(x);
      recent[i].push_back(x);
      d.q_.push_back(std::move(q));
      if (int(out[i].size()) < n[i]) {
        next[i] = x;
        work.push_back({d.seq_, std::span<const int32_t>(&next[i], 1)});
      } else {
        drafting[i] = 0;
      }
    }
  }
  return out;
}

float Drafter::own_probability(std::span<const float> logits, int32_t x) {
  soft_.assign(logits.begin(), logits.end());
  kernels::softmax(soft_.data(), int64_t(soft_.size()));
  return soft_[size_t(x)];
}

GenerateResult generate(Session& session, Sampler& sampler, const GenerateOptions& opts,
                        const std::function<bool(int32_t, const std::string&)>& on_text) {
  const auto t0 = std::chrono::steady_clock::now();
  GenerateResult r;
  const Tokenizer& tok = session.model().tokenizer();
  Tokenizer::StreamDecoder dec(tok, opts.skip_special);
  // Drafts need the cache cut back past rejected tokens: not for DeltaNet models.
  const bool can_cut = !session.model().config().has_linear();
  const bool lookup = opts.lookup > 0 && can_cut;
  std::optional<Drafter> drafter;
  if (!lookup && opts.draft_session && opts.draft_sampler && opts.n_draft > 0 && can_cut &&
      !opts.draft_session->model().config().has_linear())
    drafter.emplace(*opts.draft_session, *opts.draft_sampler, opts.draft_p_min);
  r.speculative = lookup ? "lookup" : drafter ? "draft" : "";
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
      if (drafter && !rows.empty() && row < draft.size())  // the standard rule
        id = sampler.sample_draft(next_logits(), hist, draft[row], drafter->q()[row]);
      else
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
    // Plain decoding evaluates `id`; with a draft, it follows `id` in the same pass.
    draft.clear();
    const int room = session.n_ctx() - int(hist.size());
    if (lookup)
      draft = lookup_draft(hist, opts.lookup_ngram, std::min(opts.lookup, room));
    else if (drafter && room > 0)
      draft = drafter->draw(hist, std::min(opts.n_draft, room));
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
