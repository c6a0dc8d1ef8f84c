// TokenFilter: which tokens the matcher accepts whole, for a 150k vocabulary at every step.
// Checking token by token costs a state copy and a few steps each (tens of milliseconds); a
// trie of the pieces shares the work of common prefixes and prunes a whole subtree at the first
// byte refused, which leaves few nodes to visit everywhere except inside a free string. There
// almost every token is plain text, accepted without looking (only maxLength can refuse it), so
// the walk covers just the other tokens (quotes, escapes, control bytes, partial characters).
#include <algorithm>
#include <limits>

#include "constrain/json_grammar.h"
#include "krafla/tokenizer.h"

namespace krafla {
namespace {

using json_detail::Frame;
using json_detail::Grammar;

// The code points of a piece that is plain string content (whole UTF-8 characters, RFC 3629,
// no '"', '\\' or control byte), or -1.
int64_t count_plain_chars(const std::string& piece) {
  int64_t chars = 0;
  for (size_t i = 0; i < piece.size(); ++chars) {
    const uint8_t c = uint8_t(piece[i]);
    if (c < 0x20 || c == '"' || c == '\\') return -1;
    uint8_t lo = 0x80, hi = 0xBF;
    const int more = c < 0x80 ? 0 : json_detail::utf8_lead(c, lo, hi);
    if (c >= 0x80 && more == 0) return -1;
    ++i;
    for (int k = 0; k < more; ++k, ++i) {
      if (i >= piece.size()) return -1;
      const uint8_t d = uint8_t(piece[i]);
      if (d < lo || d > hi) return -1;
      lo = 0x80;
      hi = 0xBF;
    }
  }
  return chars;
}

// The pieces of some tokens in a byte trie. A node's children are contiguous; the tokens whose
// piece ends at a node are ids[tok_begin, tok_begin + n_tok).
class Trie {
 public:
  Trie(const std::vector<std::string>& pieces, std::vector<int32_t> ids) : ids_(std::move(ids)) {
    std::sort(ids_.begin(), ids_.end(), [&](int32_t a, int32_t b) {
      return pieces[a] != pieces[b] ? pieces[a] < pieces[b] : a < b;
    });
    nodes_.push_back(Node{});
    expand(pieces, 0, 0, uint32_t(ids_.size()), 0);
    depth_ = 0;
    for (int32_t id : ids_) depth_ = std::max(depth_, pieces[id].size());
  }

  // Marks mask[id] for every token the stack accepts whole.
  void walk(const Grammar& g, const std::vector<Frame>& start, uint8_t* mask) const {
    std::vector<std::vector<Frame>> states(depth_ + 1);
    for (auto& s : states) s.reserve(start.size() + 8);
    states[0] = start;
    visit(g, 0, states, 0, mask);
  }

 private:
  struct Node {
    uint32_t first_child = 0;
    uint32_t tok_begin = 0;
    uint32_t n_tok = 0;
    uint16_t n_children = 0;
    uint8_t byte = 0;
  };

  // ids_[lo, hi) share their first d bytes (the shortest, of length d, sort first).
  void expand(const std::vector<std::string>& pieces, uint32_t node, uint32_t lo, uint32_t hi,
              size_t d) {
    uint32_t i = lo;
    while (i < hi && pieces[ids_[i]].size() == d) ++i;
    nodes_[node].tok_begin = lo;
    nodes_[node].n_tok = i - lo;
    std::vector<uint32_t> starts;  // where each child's run of tokens begins
    for (uint32_t j = i; j < hi; ++j)
      if (j == i || pieces[ids_[j]][d] != pieces[ids_[j - 1]][d]) starts.push_back(j);
    starts.push_back(hi);
    const uint32_t first = uint32_t(nodes_.size());
    nodes_[node].first_child = first;
    nodes_[node].n_children = uint16_t(starts.size() - 1);
    for (size_t k = 0; k + 1 < starts.size(); ++k) {
      Node child;
      child.byte = uint8_t(pieces[ids_[starts[k]]][d]);
      nodes_.push_back(child);
    }
    for (size_t k = 0; k + 1 < starts.size(); ++k)
      expand(pieces, first + uint32_t(k), starts[k], starts[k + 1], d + 1);
  }

  void visit(const Grammar& g, uint32_t node, std::vector<std::vector<Frame>>& states, size_t d,
             uint8_t* mask) const {
    const Node& n = nodes_[node];
    for (uint32_t k = 0; k < n.n_children; ++k) {
      const uint32_t id = n.first_child + k;
      const Node& c = nodes_[id];
      std::vector<Frame>& s = states[d + 1];
      s = states[d];
      if (!json_detail::step(g, s, c.byte)) continue;
      for (uint32_t t = 0; t < c.n_tok; ++t) mask[ids_[c.tok_begin + t]] = 1;
      if (c.n_children) visit(g, id, states, d + 1, mask);
    }
  }

  std::vector<int32_t> ids_;
  std::vector<Node> nodes_;
  size_t depth_ = 0;
};

std::vector<std::string> pieces_of(const Tokenizer& tok) {
  std::vector<std::string> pieces(size_t(tok.vocab_size()));
  for (int32_t id = 0; id < tok.vocab_size(); ++id)
    if (!tok.is_special(id)) pieces[id] = tok.piece(id);
  return pieces;
}

}  // namespace

struct TokenFilter::Impl {
  explicit Impl(std::vector<std::string> p) : pieces(std::move(p)) {
    std::vector<int32_t> all, odd;
    std::vector<std::pair<int64_t, int32_t>> plain;  // (code points, id)
    for (int32_t id = 0; id < int32_t(pieces.size()); ++id) {
      if (pieces[id].empty()) continue;  // never allowed: a model could emit them forever
      all.push_back(id);
      const int64_t chars = count_plain_chars(pieces[id]);
      if (chars < 0)
        odd.push_back(id);
      else
        plain.push_back({chars, id});
    }
    std::sort(plain.begin(), plain.end());
    for (const auto& [chars, id] : plain) {
      plain_chars.push_back(uint32_t(chars));
      plain_ids.push_back(id);
    }
    trie_all = std::make_unique<Trie>(pieces, std::move(all));
    trie_odd = std::make_unique<Trie>(pieces, std::move(odd));
  }

  void mark(const Grammar& g, const std::vector<Frame>& stack, uint8_t* mask) const {
    uint32_t room = 0;
    if (!json_detail::in_plain_string(g, stack, &room)) {
      trie_all->walk(g, stack, mask);
      return;
    }
    const size_t n_plain =
        std::upper_bound(plain_chars.begin(), plain_chars.end(), room) - plain_chars.begin();
    for (size_t i = 0; i < n_plain; ++i) mask[plain_ids[i]] = 1;
    trie_odd->walk(g, stack, mask);
  }

  std::vector<std::string> pieces;
  std::vector<uint32_t> plain_chars;  // increasing
  std::vector<int32_t> plain_ids;     // the plain tokens, in the same order
  std::unique_ptr<Trie> trie_all;     // every token with a piece
  std::unique_ptr<Trie> trie_odd;     // those that are not plain
};

TokenFilter::TokenFilter(const Tokenizer& tok) : TokenFilter(pieces_of(tok)) {}
TokenFilter::TokenFilter(std::vector<std::string> pieces)
    : impl_(std::make_unique<Impl>(std::move(pieces))) {}
TokenFilter::TokenFilter(TokenFilter&&) noexcept = default;
TokenFilter& TokenFilter::operator=(TokenFilter&&) noexcept = default;
TokenFilter::~TokenFilter() = default;

int32_t TokenFilter::n_tokens() const { return int32_t(impl_->pieces.size()); }

std::vector<int32_t> TokenFilter::allowed(const JsonMatcher& m) const {
  std::vector<uint8_t> mask(impl_->pieces.size());
  impl_->mark(*m.g_, m.stack_, mask.data());
  std::vector<int32_t> out;
  for (size_t id = 0; id < mask.size(); ++id)
    if (mask[id]) out.push_back(int32_t(id));
  return out;
}

size_t TokenFilter::apply(const JsonMatcher& m, std::span<float> logits,
                          std::span<const int32_t> end_ids) const {
  std::vector<uint8_t> mask(std::max(impl_->pieces.size(), logits.size()));
  impl_->mark(*m.g_, m.stack_, mask.data());
  const bool done = m.done();
  for (int32_t id : end_ids)
    if (id >= 0 && size_t(id) < mask.size()) mask[id] = done;
  size_t kept = 0;
  for (size_t id = 0; id < logits.size(); ++id) {
    if (mask[id])
      ++kept;
    else
      logits[id] = -std::numeric_limits<float>::infinity();
  }
  return kept;
}

}  // namespace krafla
