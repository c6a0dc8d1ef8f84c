// Tokenizer loading (tokenizer.json + tokenizer_config.json) and encoding. The behaviour
// follows the Hugging Face tokenizers as the JS reference (@lenml/tokenizers, a fork of
// transformers.js) implements them; the fixtures in tests/tokenizer come from that reference.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "krafla/error.h"
#include "krafla/json_depth.h"
#include "tokenizer/tokenizer_impl.h"
#include "tokenizer/unicode.h"

namespace krafla {

namespace tok {

void AddedTrie::insert(std::string_view s, int32_t index) {
  int32_t node = 0;
  for (unsigned char c : s) {
    uint64_t k = (static_cast<uint64_t>(node) << 8) | c;
    auto it = edges_.find(k);
    if (it == edges_.end()) {
      it = edges_.emplace(k, static_cast<int32_t>(token_.size())).first;
      token_.push_back(-1);
    }
    node = it->second;
  }
  token_[node] = index;
}

int32_t AddedTrie::longest_match(std::string_view text, size_t pos, size_t& length) const {
  int32_t node = 0, best = -1;
  for (size_t i = pos; i < text.size(); ++i) {
    auto it = edges_.find((static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[i]));
    if (it == edges_.end()) break;
    node = it->second;
    if (token_[node] >= 0) {
      best = token_[node];
      length = i + 1 - pos;
    }
  }
  return best;
}

}  // namespace tok

namespace {

// tokenizer_config.json names tokens as a string or as {"content": ..., ...}.
std::string config_token(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return {};
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string())
    return v["content"].get<std::string>();
  return {};
}

// The ids a post-processor puts before and after the text (add_special_tokens=true).
void read_post_processor(const nlohmann::json& j, const tok::Vocab& vocab,
                         std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  if (j.is_null()) return;
  std::string type = j.value("type", "");
  auto id_of = [&](const std::string& token) {
    auto id = vocab.find(token);
    if (!id)
      throw Error(
          fmt::format("tokenizer.json: post-processor token '{}' is not in the "
                      "vocabulary",
                      token));
    return *id;
  };
  if (type == "Sequence") {
    for (const auto& p : j.at("processors")) read_post_processor(p, vocab, prefix, suffix);
  } else if (type == "ByteLevel") {
    // Only trims offsets; ids are unchanged.
  } else if (type == "TemplateProcessing") {
    std::vector<int32_t> before, after;
    bool seen_a = false;
    for (const auto& item : j.at("single")) {
      if (item.contains("SpecialToken")) {
        (seen_a ? after : before)
            .push_back(id_of(item["SpecialToken"].at("id").get<std::string>()));
      } else if (item.contains("Sequence")) {
        if (item["Sequence"].value("id", "A") == "A") seen_a = true;
      }
    }
    prefix.insert(prefix.begin(), before.begin(), before.end());
    suffix.insert(suffix.end(), after.begin(), after.end());
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    prefix.insert(prefix.begin(), id_of(j.at("cls").at(0).get<std::string>()));
    suffix.push_back(id_of(j.at("sep").at(0).get<std::string>()));
  } else {
    throw Error(fmt::format("tokenizer.json: unsupported post-processor type '{}'", type));
  }
}

}  // namespace

Tokenizer Tokenizer::from_json(std::string_view tokenizer_json, std::string_view tokenizer_config) {
  tok::TokenizerJson file = tok::read_tokenizer_json(tokenizer_json);
  const nlohmann::json& j = file.rest;
  nlohmann::json config = nlohmann::json::object();
  try {
    if (!json_depth_ok(tokenizer_config))
      throw Error(
          fmt::format("tokenizer_config.json: nested more than {} levels deep", kMaxJsonDepth));
    if (!tokenizer_config.empty()) config = nlohmann::json::parse(tokenizer_config);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("tokenizer_config.json: invalid JSON: {}", e.what()));
  }
  auto impl = std::make_unique<Impl>();
  try {
    const auto& model = j.at("model");
    if (model.value("type", "BPE") != "BPE")
      throw Error(
          fmt::format("tokenizer.json: unsupported model type '{}'", model.value("type", "")));
    tok::BpeModel::read_vocab(file, impl->vocab);

    std::vector<std::string> special_strings;
    if (j.contains("added_tokens")) {
      for (const auto& a : j["added_tokens"]) {
        tok::AddedToken t{a.at("content").get<std::string>(),
                          tok::int_field(a, "id", -1, 0, INT32_MAX, "added token"),
                          a.value("lstrip", false), a.value("rstrip", false),
                          a.value("special", false)};
        impl->vocab.set(t.content, t.id);
        impl->trie.insert(t.content, static_cast<int32_t>(impl->added.size()));
        if (!t.special)
          impl->plain_trie.insert(t.content, static_cast<int32_t>(impl->added.size()));
        if (t.special) special_strings.push_back(t.content);
        impl->added.push_back(std::move(t));
      }
    }
    if (config.contains("additional_special_tokens") &&
        config["additional_special_tokens"].is_array()) {
      for (const auto& t : config["additional_special_tokens"]) {
        if (t.is_string()) special_strings.push_back(t.get<std::string>());
        if (t.is_object() && t.contains("content"))
          special_strings.push_back(t["content"].get<std::string>());
      }
    }
    impl->model = std::make_unique<tok::BpeModel>(model, file, impl->vocab);

    // Flags by id; skip_special and the ByteLevel decoder compare token strings, as the
    // reference does, so a vocabulary entry spelled like an added token counts as one.
    impl->flags.assign(impl->vocab.tokens.size(), 0);
    auto flag = [&](const std::string& s, uint8_t f) {
      if (auto id = impl->vocab.find(s)) impl->flags[*id] |= f;
    };
    for (const auto& s : special_strings) flag(s, Impl::kSpecial);
    for (const auto& a : impl->added) flag(a.content, Impl::kAdded);

    impl->normalizer = tok::Normalizer::from_json(j.value("normalizer", nlohmann::json()));
    impl->pre_tokenizer = tok::PreTokenizer::from_json(j.value("pre_tokenizer", nlohmann::json()));
    impl->decoder = tok::DecoderPlan::from_json(j.value("decoder", nlohmann::json()));
    read_post_processor(j.value("post_processor", nlohmann::json()), impl->vocab, impl->prefix_ids,
                        impl->suffix_ids);

    // transformers' LlamaTokenizer with legacy=false replaces the normalizer by a Metaspace
    // pre-tokenizer that prepends "▁" to the first section only.
    std::string cls = config.value("tokenizer_class", "");
    if (cls.ends_with("Fast")) cls.resize(cls.size() - 4);
    if (cls == "LlamaTokenizer" && config.contains("legacy") && config["legacy"].is_boolean() &&
        !config["legacy"].get<bool>()) {
      impl->llama_non_legacy = true;
      impl->normalizer = nullptr;
      impl->pre_tokenizer = tok::PreTokenizer::metaspace("\u2581", true);
    }
    if (config.contains("clean_up_tokenization_spaces") &&
        config["clean_up_tokenization_spaces"].is_boolean())
      impl->cleanup = config["clean_up_tokenization_spaces"].get<bool>();
    if (auto s = config_token(config, "bos_token"); !s.empty())
      impl->bos = impl->vocab.find(s).value_or(-1);
    if (auto s = config_token(config, "eos_token"); !s.empty())
      impl->eos = impl->vocab.find(s).value_or(-1);
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("tokenizer.json: {}", e.what()));
  }
  return Tokenizer(std::move(impl));
}

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::Impl::encode_text(std::string_view text, bool parse_special) const {
  // Added tokens are cut out of the raw text first, so normalization cannot break them.
  // Without parse_special the special ones are not looked for (the Rust library skips their
  // matches; the text then goes through the model like any other).
  const tok::AddedTrie& cut = parse_special ? trie : plain_trie;
  struct Section {
    std::string_view text;
    int32_t added = -1;  // index into `added`
  };
  std::vector<Section> sections;
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    size_t len = 0;
    int32_t a = cut.longest_match(text, i, len);
    if (a < 0) {
      ++i;
      continue;
    }
    if (i > start) sections.push_back({text.substr(start, i - start)});
    sections.push_back({text.substr(i, len), a});
    i += len;
    start = i;
  }
  if (start < text.size()) sections.push_back({text.substr(start)});
  // lstrip/rstrip eat the whitespace next to the token (single_word and normalized are not
  // honoured, as in the reference; none of the supported files sets them).
  for (size_t i = 0; i < sections.size(); ++i) {
    if (sections[i].added < 0) continue;
    const auto& t = added[sections[i].added];
    if (t.lstrip && i > 0) sections[i - 1].text = tok::trim_end(sections[i - 1].text);
    if (t.rstrip && i + 1 < sections.size())
      sections[i + 1].text = tok::trim_start(sections[i + 1].text);
  }

  std::vector<int32_t> ids;
  for (size_t i = 0; i < sections.size(); ++i) {
    const auto& s = sections[i];
    if (s.text.empty()) continue;
    if (s.added >= 0) {
      ids.push_back(vocab.find(s.text).value_or(added[s.added].id));
      continue;
    }
    std::string x(s.text);
    if (normalizer) x = normalizer->normalize(std::move(x));
    if (x.empty()) continue;
    std::vector<std::string> words;
    if (pre_tokenizer) {
      words = pre_tokenizer->split({std::move(x)}, i);
    } else {
      words.push_back(std::move(x));
    }
    size_t first = ids.size();
    for (const auto& w : words) model->encode_word(w, vocab, ids);
    model->fuse_unknown(ids, first);
  }
  return ids;
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::vector<int32_t> ids;
  if (impl_->llama_non_legacy && !text.empty()) {
    // transformers' T5/Llama non-legacy trick: encode "▁" + text, then drop a lone leading
    // "▁" when a special token follows it.
    std::string t = "\u2581" + tok::replace_all(text, "\u2581", " ");
    ids = impl_->encode_text(t, parse_special);
    auto under = impl_->vocab.find("\u2581");
    if (ids.size() > 1 && under && ids[0] == *under && (impl_->flags[ids[1]] & Impl::kSpecial))
      ids.erase(ids.begin());
  } else {
    ids = impl_->encode_text(text, parse_special);
  }
  if (!add_special) return ids;
  std::vector<int32_t> out(impl_->prefix_ids);
  out.insert(out.end(), ids.begin(), ids.end());
  out.insert(out.end(), impl_->suffix_ids.begin(), impl_->suffix_ids.end());
  return out;
}

void Tokenizer::Impl::check_id(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= vocab.tokens.size())
    throw Error(
        fmt::format("token id {} is outside the vocabulary (size {})", id, vocab.tokens.size()));
}

int32_t Tokenizer::vocab_size() const { return static_cast<int32_t>(impl_->vocab.tokens.size()); }

std::optional<int32_t> Tokenizer::token_id(std::string_view token) const {
  return impl_->vocab.find(token);
}

std::string Tokenizer::token_text(int32_t id) const {
  impl_->check_id(id);
  return impl_->vocab.tokens[id];
}

bool Tokenizer::is_special(int32_t id) const {
  impl_->check_id(id);
  return impl_->flags[id] & Impl::kSpecial;
}

std::string Tokenizer::kind() const {
  if (impl_->decoder.byte_level) return "byte-level BPE";
  if (impl_->decoder.byte_fallback) return "BPE with byte fallback";
  return "BPE";
}

int32_t Tokenizer::n_added() const { return static_cast<int32_t>(impl_->added.size()); }

int32_t Tokenizer::bos_id() const { return impl_->bos; }
int32_t Tokenizer::eos_id() const { return impl_->eos; }

}  // namespace krafla
