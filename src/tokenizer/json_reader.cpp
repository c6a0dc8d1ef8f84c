#include "tokenizer/json_reader.h"

#include <fmt/format.h>

#include "krafla/error.h"
#include "krafla/json_depth.h"

namespace krafla::tok {

namespace {

using json = nlohmann::json;

class Sax final : public nlohmann::json_sax<json> {
 public:
  explicit Sax(TokenizerJson& out) : out_(out) {}

  bool null() override { return value(json()); }
  bool boolean(bool v) override { return value(json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab) return vocab_entry(v);
    return value(json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab) return vocab_entry(static_cast<int64_t>(v));
    return value(json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(json(v)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      // The old "a b" form; like the reference, split at spaces and keep the first two parts.
      size_t sp = v.find(' ');
      if (sp == std::string::npos)
        throw Error(
            fmt::format("tokenizer.json: merge {} '{}' has no space", out_.merges.size(), v));
      size_t sp2 = v.find(' ', sp + 1);
      size_t right = (sp2 == std::string::npos ? v.size() : sp2) - sp - 1;
      auto offset = static_cast<uint32_t>(out_.arena.size());
      out_.arena.append(v, 0, sp).append(v, sp + 1, right);
      out_.merges.push_back({offset, static_cast<uint32_t>(sp), static_cast<uint32_t>(right)});
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      if (pair_parts_ == 0) pair_offset_ = static_cast<uint32_t>(out_.arena.size());
      if (pair_parts_ < 2) pair_len_[pair_parts_] = static_cast<uint32_t>(v.size());
      out_.arena.append(v);
      ++pair_parts_;
      return true;
    }
    return value(json(std::move(v)));
  }
  bool binary(binary_t&) override { return value(json()); }

  bool key(string_t& k) override {
    if (mode_ == Mode::kVocab) {
      key_ = std::move(k);
    } else {
      keys_.back() = std::move(k);
    }
    return true;
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) return fail("an object inside model.vocab or model.merges");
    if (at_model_field("vocab")) return stream(Mode::kVocab, out_.has_vocab, out_.vocab);
    return open(json::object());
  }
  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }
  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      pair_parts_ = 0;
      return true;
    }
    if (mode_ != Mode::kDom) return fail("nested arrays in model.merges");
    if (at_model_field("merges")) return stream(Mode::kMerges, out_.has_merges, out_.merges);
    return open(json::array());
  }
  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (pair_parts_ != 2) return fail("a merge that is not a pair of strings");
      out_.merges.push_back({pair_offset_, pair_len_[0], pair_len_[1]});
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    return close();
  }

  bool parse_error(std::size_t pos, const std::string&,
                   const nlohmann::detail::exception& e) override {
    throw Error(fmt::format("tokenizer.json: invalid JSON at byte {}: {}", pos, e.what()));
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };

  // True when the value about to open is root["model"][field].
  bool at_model_field(const char* field) const {
    return stack_.size() == 2 && keys_[0] == "model" && keys_[1] == field;
  }
  // Sends the field that opens now into `entries` (in `mode`) instead of the DOM.
  template <class Entry>
  bool stream(Mode mode, bool& has, std::vector<Entry>& entries) {
    mode_ = mode;
    has = true;
    entries.reserve(1 << 16);
    return true;
  }
  bool vocab_entry(int64_t id) {
    auto offset = static_cast<uint32_t>(out_.arena.size());
    out_.arena.append(key_);
    out_.vocab.push_back({offset, static_cast<uint32_t>(key_.size()), static_cast<int32_t>(id)});
    return true;
  }
  bool fail(const char* what) { throw Error(fmt::format("tokenizer.json: unexpected {}", what)); }
  // Places v in the current container (or as the root) and returns a pointer to it.
  json* place(json v) {
    if (stack_.empty()) {
      out_.rest = std::move(v);
      return &out_.rest;
    }
    json& top = *stack_.back();
    if (top.is_object()) return &(top[keys_.back()] = std::move(v));
    top.push_back(std::move(v));
    return &top.back();
  }
  bool value(json v) {
    if (mode_ != Mode::kDom) return fail("a non-string value in model.merges or model.vocab");
    place(std::move(v));
    return true;
  }
  bool open(json v) {
    stack_.push_back(place(std::move(v)));
    keys_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }

  TokenizerJson& out_;
  Mode mode_ = Mode::kDom;
  std::vector<json*> stack_;
  std::vector<std::string> keys_;  // the current key at each open level ("" for arrays)
  std::string key_;
  int pair_parts_ = 0;
  uint32_t pair_offset_ = 0, pair_len_[2] = {0, 0};
};

}  // namespace

int int_field(const nlohmann::json& j, const char* key, int def, int lo, int hi, const char* what) {
  const auto it = j.find(key);
  if (it == j.end()) {
    if (def < lo || def > hi) throw Error(fmt::format("tokenizer.json: {} has no '{}'", what, key));
    return def;
  }
  if (!it->is_number_integer() || it->get<int64_t>() < lo || it->get<int64_t>() > hi)
    throw Error(fmt::format("tokenizer.json: {} '{}' is {}, not an integer from {} to {}", what,
                            key, it->dump(), lo, hi));
  return int(it->get<int64_t>());
}

TokenizerJson read_tokenizer_json(std::string_view text) {
  if (!json_depth_ok(text))
    throw Error(fmt::format("tokenizer.json: nested more than {} levels deep", kMaxJsonDepth));
  TokenizerJson out;
  out.arena.reserve(text.size() / 2);
  Sax sax(out);
  json::sax_parse(text.begin(), text.end(), &sax);
  return out;
}

}  // namespace krafla::tok
