#include "model_info.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "krafla/model.h"

namespace krafla::cli {
namespace {

// ordered: the dump lists the config in docs/format.md's order, not alphabetically.
using json = nlohmann::ordered_json;

// The parsed config under docs/format.md's key names, with the defaults the loader fills in
// (rope_dim, per-layer lists), so the dump shows what a run uses.
json config_json(const ModelConfig& c) {
  std::vector<int> window;  // ModelConfig::layers as docs/format.md's per-layer lists
  std::vector<bool> rope, rope_local, linear, moe;
  for (const LayerConfig& l : c.layers) {
    moe.push_back(l.moe);
    window.push_back(l.window);
    rope.push_back(l.rope != LayerConfig::Rope::None);
    rope_local.push_back(l.rope == LayerConfig::Rope::Local);
    linear.push_back(l.kind == LayerConfig::Kind::Linear);
  }
  json j = {{"arch", c.arch},
            {"n_vocab", c.n_vocab},
            {"dim", c.dim},
            {"n_layers", c.n_layers},
            {"n_heads", c.n_heads},
            {"n_kv_heads", c.n_kv_heads},
            {"head_dim", c.head_dim},
            {"ffn_dim", c.ffn_dim},
            {"norm_eps", c.norm_eps},
            {"max_ctx", c.max_ctx},
            {"rope_dim", c.rope_dim},
            {"rope_freqs", c.rope_freqs},
            {"rope_attn_factor", c.rope_attn_factor},
            {"sliding_window", c.sliding_window},
            {"tie_embeddings", c.tie_embeddings},
            {"chat_template", c.chat_template},
            {"bos_id", c.bos_id},
            {"eos_ids", c.eos_ids},
            {"activation", c.activation == ModelConfig::Activation::SiLU ? "silu" : "gelu_tanh"},
            {"qkv_bias", c.qkv_bias},
            {"qk_norm", c.qk_norm},
            {"layer_window", window},
            {"layer_rope", rope},
            {"embd_scale", c.embd_scale},
            {"attn_scale", c.attn_scale},
            {"attn_softcap", c.attn_softcap},
            {"final_softcap", c.final_softcap},
            {"post_norms", c.post_norms},
            {"attn_gate", c.attn_gate}};
  if (!c.rope_freqs_local.empty()) {
    j["rope_freqs_local"] = c.rope_freqs_local;
    j["layer_rope_local"] = rope_local;
  }
  if (c.has_linear()) {
    j["layer_linear"] = linear;
    for (auto [k, v] : {std::pair{"lin_k_heads", c.lin_k_heads},
                        {"lin_v_heads", c.lin_v_heads},
                        {"lin_k_dim", c.lin_k_dim},
                        {"lin_v_dim", c.lin_v_dim},
                        {"lin_conv", c.lin_conv}})
      j[k] = v;
  }
  if (c.has_moe()) {
    j["layer_moe"] = moe;
    for (auto [k, v] : {std::pair{"n_experts", c.n_experts},
                        {"n_experts_used", c.n_experts_used},
                        {"expert_ffn_dim", c.expert_ffn_dim},
                        {"shared_expert_ffn_dim", c.shared_expert_ffn_dim}})
      j[k] = v;
    j["norm_topk_prob"] = c.norm_topk_prob;
  }
  return j;
}

json tokenizer_json(const Tokenizer& t) {
  int32_t n_special = 0;
  for (int32_t id = 0; id < t.vocab_size(); ++id) n_special += t.is_special(id);
  return {{"kind", t.kind()},       {"vocab_size", t.vocab_size()}, {"n_added", t.n_added()},
          {"n_special", n_special}, {"bos_id", t.bos_id()},         {"eos_id", t.eos_id()}};
}

json info_json(const ModelFileInfo& info, const Tokenizer& tok) {
  json j = {{"path", info.path},
            {"format", info.format},
            {"version", info.version},
            {"kind", info.kind},
            {"file_size", info.file_size},
            {"data_offset", info.data_offset},
            {"source", json::parse(info.source_json)}};
  if (info.config) j["config"] = config_json(*info.config);
  j["tokenizer"] = tokenizer_json(tok);
  json tensors = json::array(), totals = json::object();
  uint64_t n_params = 0, weight_bytes = 0;
  // A token reads k of the E experts of each 3-D expert tensor: the rest is inactive.
  const ModelConfig* c = info.config ? &*info.config : nullptr;
  uint64_t inactive_params = 0, inactive_bytes = 0;
  for (const auto& t : info.tensors) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= uint64_t(d);
    tensors.push_back({{"name", t.name},
                       {"dtype", t.dtype},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"bytes", t.bytes}});
    if (!t.gguf_type.empty()) tensors.back()["gguf_type"] = t.gguf_type;
    json& tot = totals[t.dtype];
    if (tot.is_null()) tot = {{"tensors", 0}, {"elements", 0}, {"bytes", 0}};
    tot["tensors"] = tot["tensors"].get<uint64_t>() + 1;
    tot["elements"] = tot["elements"].get<uint64_t>() + n;
    tot["bytes"] = tot["bytes"].get<uint64_t>() + t.bytes;
    if (t.dtype != "bytes") {  // the tokenizer files travel as `bytes` entries
      n_params += n;
      weight_bytes += t.bytes;
    }
    if (c && c->has_moe() && t.shape.size() == 3) {
      const uint64_t idle = uint64_t(c->n_experts - c->n_experts_used);
      inactive_params += n / uint64_t(c->n_experts) * idle;
      inactive_bytes += t.bytes / uint64_t(c->n_experts) * idle;
    }
  }
  j["tensors"] = tensors;
  j["totals"] = totals;
  j["n_params"] = n_params;
  j["weight_bytes"] = weight_bytes;
  if (c && c->has_moe()) {  // what one token reads of the weights
    j["n_active_params"] = n_params - inactive_params;
    j["active_weight_bytes"] = weight_bytes - inactive_bytes;
  }
  return j;
}

std::string token_label(const Tokenizer& tok, int64_t id) {
  if (id < 0) return "none";
  if (id >= tok.vocab_size()) return fmt::format("{} (outside the vocabulary)", id);
  return fmt::format("{} '{}'", id, tok.token_text(int32_t(id)));
}

// A config value on one line: long float lists (RoPE frequencies) as count and ends.
std::string value_text(const std::string& key, const json& v, const Tokenizer& tok) {
  if (key == "bos_id") return token_label(tok, v.get<int64_t>());
  if (key == "eos_ids") {
    std::vector<std::string> parts;
    for (const auto& id : v) parts.push_back(token_label(tok, id.get<int64_t>()));
    return parts.empty() ? "none" : fmt::format("{}", fmt::join(parts, ", "));
  }
  if (key == "chat_template")
    return v.get<std::string>().empty() ? "none recorded" : v.get<std::string>();
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_float()) return fmt::format("{}", v.get<float>());  // as the file's float32
  if (v.is_array() && !v.empty() && v[0].is_number_float()) {
    const auto f = v.get<std::vector<float>>();
    if (f.size() > 8) return fmt::format("{} values, {} … {}", f.size(), f.front(), f.back());
    return fmt::format("[{}]", fmt::join(f, ", "));
  }
  return v.dump();
}

std::string mib(uint64_t bytes) { return fmt::format("{:.2f} MiB", bytes / 1048576.0); }

void print_text(const json& j, const Tokenizer& tok) {
  fmt::print("file        {}\n", j["path"].get<std::string>());
  fmt::print("format      {} version {}, kind {}\n", j["format"].get<std::string>(),
             j["version"].get<int>(), j["kind"].get<std::string>());
  fmt::print("size        {} bytes ({}), tensor data from offset {}\n",
             j["file_size"].get<uint64_t>(), mib(j["file_size"].get<uint64_t>()),
             j["data_offset"].get<uint64_t>());
  fmt::print("source      {}\n", j["source"].dump());
  if (j.contains("config")) {
    fmt::print("\nconfig\n");
    for (const auto& [k, v] : j["config"].items())
      fmt::print("  {:<21} {}\n", k, value_text(k, v, tok));
  }
  const json& t = j["tokenizer"];
  fmt::print("\ntokenizer   {}, {} tokens ({} added, {} special); bos {}, eos {}\n",
             t["kind"].get<std::string>(), t["vocab_size"].get<int>(), t["n_added"].get<int>(),
             t["n_special"].get<int>(), token_label(tok, t["bos_id"].get<int64_t>()),
             token_label(tok, t["eos_id"].get<int64_t>()));
  fmt::print("\ntensors ({})\n", j["tensors"].size());
  // a GGUF tensor rewritten at load: "q8_0 < Q6_K", what it runs as and the file's type
  fmt::print("  {:>5}  {:<24} {:<11} {:<16} {:>12} {:>12}\n", "#", "name", "dtype", "shape",
             "bytes", "offset");
  int i = 0;
  for (const auto& x : j["tensors"])
    fmt::print("  {:>5}  {:<24} {:<11} {:<16} {:>12} {:>12}\n", i++, x["name"].get<std::string>(),
               x["dtype"].get<std::string>() +
                   (x.contains("gguf_type") ? " < " + x["gguf_type"].get<std::string>() : ""),
               fmt::format("[{}]", fmt::join(x["shape"].get<std::vector<int64_t>>(), ", ")),
               x["bytes"].get<uint64_t>(), x["offset"].get<uint64_t>());
  fmt::print("\ntotals\n  {:<8} {:>7} {:>14} {:>14} {:>12}\n", "dtype", "tensors", "elements",
             "bytes", "");
  for (const auto& [dt, x] : j["totals"].items())
    fmt::print("  {:<8} {:>7} {:>14} {:>14} {:>12}\n", dt, x["tensors"].get<uint64_t>(),
               x["elements"].get<uint64_t>(), x["bytes"].get<uint64_t>(),
               mib(x["bytes"].get<uint64_t>()));
  fmt::print(
      "  weights: {} parameters ({:.2f} M), {} bytes ({}); `bytes` entries are the "
      "tokenizer files\n",
      j["n_params"].get<uint64_t>(), j["n_params"].get<uint64_t>() / 1e6,
      j["weight_bytes"].get<uint64_t>(), mib(j["weight_bytes"].get<uint64_t>()));
  if (j.contains("n_active_params")) {
    const auto& c = j["config"];
    fmt::print(
        "  active per token: {} parameters ({:.2f} M), {} bytes ({}): {} of {} experts in {} "
        "layers\n",
        j["n_active_params"].get<uint64_t>(), j["n_active_params"].get<uint64_t>() / 1e6,
        j["active_weight_bytes"].get<uint64_t>(), mib(j["active_weight_bytes"].get<uint64_t>()),
        c["n_experts_used"].get<int>(), c["n_experts"].get<int>(),
        std::count(c["layer_moe"].begin(), c["layer_moe"].end(), true));
  }
}

}  // namespace

int print_model_info(const std::string& path, bool json_out) {
  const ModelFileInfo info = inspect_model_file(path);
  const Tokenizer tok = load_tokenizer(path);
  const json j = info_json(info, tok);
  if (json_out) {
    fmt::print("{}\n", j.dump(1));
  } else {
    print_text(j, tok);
  }
  return 0;
}

}  // namespace krafla::cli
