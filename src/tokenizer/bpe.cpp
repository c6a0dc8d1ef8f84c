#include "tokenizer/bpe.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <queue>

#include "krafla/error.h"
#include "tokenizer/unicode.h"

namespace krafla::tok {

std::optional<int32_t> Vocab::find(std::string_view s) const {
  int32_t id = index.find(s, tokens);
  if (id < 0) return std::nullopt;
  return id;
}

namespace {

void check_id(std::string_view token, int32_t id) {
  if (id < 0) throw Error(fmt::format("tokenizer.json: token '{}' has negative id {}", token, id));
  if (id > Vocab::kMaxId)
    throw Error(
        fmt::format("tokenizer.json: token '{}' has id {}, above the largest supported "
                    "({})",
                    token, id, Vocab::kMaxId));
}

}  // namespace

void Vocab::set(const std::string& token, int32_t id) {
  check_id(token, id);
  if (static_cast<size_t>(id) >= tokens.size()) tokens.resize(id + 1);
  tokens[id] = token;
  index.insert(id, tokens);
}

void BpeModel::read_vocab(TokenizerJson& file, Vocab& vocab) {
  if (!file.has_vocab) throw Error("tokenizer.json: model.vocab is missing or not an object");
  vocab.tokens.resize(file.vocab.size());
  for (const auto& e : file.vocab) {
    check_id(file.view(e.offset, e.length), e.id);
    if (static_cast<size_t>(e.id) >= vocab.tokens.size()) vocab.tokens.resize(e.id + 1);
    vocab.tokens[e.id] = file.view(e.offset, e.length);
  }
  vocab.index.reserve(vocab.tokens.size() + 8192, vocab.tokens);
  // In file order, so that a duplicated string keeps its last id (JSON.parse keeps the last).
  for (const auto& e : file.vocab) vocab.index.insert(e.id, vocab.tokens);
  file.vocab.clear();
}

BpeModel::BpeModel(const nlohmann::json& model, const TokenizerJson& file, const Vocab& vocab) {
  std::string type = model.value("type", "BPE");
  if (type != "BPE") throw Error(fmt::format("tokenizer.json: unsupported model type '{}'", type));
  for (const char* field : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    if (model.contains(field) && model[field].is_string() &&
        !model[field].get<std::string>().empty())
      throw Error(fmt::format("tokenizer.json: model.{} is not supported", field));
  }
  if (model.contains("unk_token") && model["unk_token"].is_string())
    unk_id_ = vocab.find(model["unk_token"].get<std::string>()).value_or(-1);
  fuse_unk_ = model.value("fuse_unk", false);
  byte_fallback_ = model.value("byte_fallback", false);
  ignore_merges_ = model.value("ignore_merges", false);
  for (int b = 0; b < 256; ++b)
    byte_ids_[b] = vocab.find(fmt::format("<0x{:02X}>", b)).value_or(-1);

  auto intern = [&](std::string_view s) -> int32_t {
    if (auto id = vocab.find(s)) return *id;
    int32_t e = extra_.find(s, extra_tokens_);
    if (e < 0) {
      e = static_cast<int32_t>(extra_tokens_.size());
      extra_tokens_.emplace_back(s);
      extra_.insert(e, extra_tokens_);
    }
    return kExtraBase + e;
  };
  if (!file.has_merges) throw Error("tokenizer.json: model.merges is missing");
  merges_.reserve(file.merges.size());
  int32_t rank = 0;
  for (const auto& m : file.merges) {
    std::string_view a = file.view(m.offset, m.left), b = file.view(m.offset + m.left, m.right);
    std::string_view ab = file.view(m.offset, m.left + m.right);
    // A pair listed twice keeps its last rank, as the reference's Map(list) does.
    merges_.put(key(intern(a), intern(b)), Merge{rank, intern(ab)});
    ++rank;
  }
}

int32_t BpeModel::symbol(std::string_view s, const Vocab& vocab) const {
  if (auto id = vocab.find(s)) return *id;
  int32_t e = extra_.find(s, extra_tokens_);
  return e < 0 ? -1 : kExtraBase + e;
}

void BpeModel::emit(std::string_view piece, int32_t sym, const Vocab& vocab,
                    std::vector<int32_t>& out) const {
  if (sym >= 0 && sym < kExtraBase) {
    out.push_back(sym);
    return;
  }
  if (byte_fallback_) {
    bool all = true;
    for (unsigned char c : piece) all = all && byte_ids_[c] >= 0;
    if (all) {
      for (unsigned char c : piece) out.push_back(byte_ids_[c]);
      return;
    }
  }
  // Without an unk token the reference yields an undefined id; we drop the piece instead.
  if (unk_id_ >= 0) out.push_back(unk_id_);
}

void BpeModel::fuse_unknown(std::vector<int32_t>& ids, size_t from) const {
  if (!fuse_unk_ || unk_id_ < 0) return;
  size_t w = from;
  for (size_t r = from; r < ids.size(); ++r) {
    if (ids[r] == unk_id_ && w > from && ids[w - 1] == unk_id_) continue;
    ids[w++] = ids[r];
  }
  ids.resize(w);
}

void BpeModel::encode_word(std::string_view word, const Vocab& vocab,
                           std::vector<int32_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_) {
    if (auto id = vocab.find(word)) {
      out.push_back(*id);
      return;
    }
  }
  struct Node {
    uint32_t start, end;  // bytes of the word
    int32_t sym;
    int32_t prev, next;  // node indices, -1 at the ends
    bool alive;
  };
  std::vector<Node> nodes;
  nodes.reserve(word.size());
  for (size_t i = 0; i < word.size();) {
    size_t start = i;
    unicode::next_codepoint(word, i);
    int32_t n = static_cast<int32_t>(nodes.size());
    nodes.push_back({static_cast<uint32_t>(start), static_cast<uint32_t>(i),
                     symbol(word.substr(start, i - start), vocab), n - 1, -1, true});
    if (n > 0) nodes[n - 1].next = n;
  }

  // Lowest rank first; among equal ranks the leftmost pair (the reference's positional bias).
  struct Cand {
    int32_t rank;
    uint32_t pos;
    int32_t left, right;
    int32_t lsym, rsym;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> queue;
  auto consider = [&](int32_t l) {
    if (l < 0) return;
    int32_t r = nodes[l].next;
    if (r < 0 || nodes[l].sym < 0 || nodes[r].sym < 0) return;
    if (const Merge* m = merges_.find(key(nodes[l].sym, nodes[r].sym)))
      queue.push({m->rank, nodes[l].start, l, r, nodes[l].sym, nodes[r].sym});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(nodes.size()); ++i) consider(i);

  while (!queue.empty()) {
    Cand c = queue.top();
    queue.pop();
    Node& l = nodes[c.left];
    if (!l.alive || l.next != c.right || l.sym != c.lsym) continue;
    Node& r = nodes[c.right];
    if (!r.alive || r.sym != c.rsym) continue;
    l.end = r.end;
    l.sym = merges_.find(key(c.lsym, c.rsym))->result;
    l.next = r.next;
    r.alive = false;
    if (r.next >= 0) nodes[r.next].prev = c.left;
    consider(l.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0; i = nodes[i].next)
    emit(word.substr(nodes[i].start, nodes[i].end - nodes[i].start), nodes[i].sym, vocab, out);
}

}  // namespace krafla::tok
