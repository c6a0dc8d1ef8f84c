// Reads the normalized config (docs/format.md) and checks that it describes a model this
// build can run, naming the field when it does not.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "krafla/error.h"
#include "model/model_impl.h"

namespace krafla {
namespace {

const std::vector<std::string> kKnownArchs = {"llama",   "mistral", "qwen2",  "qwen3",
                                              "smollm3", "gemma2",  "gemma3", "qwen3_5"};
// Every key a version-1 config may hold: a key outside this list comes from a newer converter
// and names a feature this build would silently get wrong, so it is refused.
const std::vector<std::string> kKnownKeys = {
    "arch",      "n_vocab",   "dim",          "n_layers",         "n_heads",
    "n_kv_heads", "head_dim", "ffn_dim",      "norm_eps",         "rope_freqs",
    "rope_attn_factor", "max_ctx", "sliding_window", "tie_embeddings", "bos_id",
    "eos_ids",   "chat_template", "qkv_bias", "qk_norm",         "layer_window",
    "layer_rope", "activation", "embd_scale", "attn_scale", "attn_softcap", "final_softcap",
    "post_norms", "rope_freqs_local", "layer_rope_local", "rope_dim", "attn_gate",
    "layer_linear", "lin_k_heads", "lin_v_heads", "lin_k_dim", "lin_v_dim", "lin_conv"};

template <typename T>
T req(const nlohmann::json& c, const char* key, const std::string& path) {
  if (!c.contains(key)) throw Error(fmt::format("{}: config field '{}' is missing", path, key));
  try {
    return c[key].get<T>();
  } catch (const nlohmann::json::exception&) {
    throw Error(fmt::format("{}: config field '{}' has the wrong type ({})", path, key,
                            c[key].dump().substr(0, 40)));
  }
}

template <typename T>
T opt(const nlohmann::json& c, const char* key, T def, const std::string& path) {
  return c.contains(key) ? req<T>(c, key, path) : def;
}

}  // namespace

ModelConfig parse_config(const nlohmann::json& meta, const std::string& path) {
  if (!meta.contains("config") || !meta["config"].is_object())
    throw Error(fmt::format("{}: metadata has no 'config' object", path));
  const auto& c = meta["config"];
  ModelConfig m;
  m.arch = req<std::string>(c, "arch", path);
  if (std::find(kKnownArchs.begin(), kKnownArchs.end(), m.arch) == kKnownArchs.end())
    throw Error(fmt::format("{}: unknown architecture '{}' (this build runs: {})", path, m.arch,
                            fmt::join(kKnownArchs, ", ")));
  m.n_vocab = req<int>(c, "n_vocab", path);
  m.dim = req<int>(c, "dim", path);
  m.n_layers = req<int>(c, "n_layers", path);
  m.n_heads = req<int>(c, "n_heads", path);
  m.n_kv_heads = req<int>(c, "n_kv_heads", path);
  m.head_dim = req<int>(c, "head_dim", path);
  m.ffn_dim = req<int>(c, "ffn_dim", path);
  m.norm_eps = req<float>(c, "norm_eps", path);
  m.rope_freqs = req<std::vector<float>>(c, "rope_freqs", path);
  m.rope_attn_factor = opt<float>(c, "rope_attn_factor", 1.0f, path);
  m.max_ctx = req<int>(c, "max_ctx", path);
  m.sliding_window = opt<int>(c, "sliding_window", 0, path);
  m.tie_embeddings = req<bool>(c, "tie_embeddings", path);
  m.bos_id = opt<int>(c, "bos_id", -1, path);
  m.eos_ids = opt<std::vector<int>>(c, "eos_ids", {}, path);
  m.chat_template = opt<std::string>(c, "chat_template", "", path);
  m.qkv_bias = opt<bool>(c, "qkv_bias", false, path);
  m.qk_norm = opt<bool>(c, "qk_norm", false, path);
  m.layer_window = opt<std::vector<int>>(c, "layer_window", {}, path);
  m.layer_rope = opt<std::vector<bool>>(c, "layer_rope", {}, path);
  const std::string act = opt<std::string>(c, "activation", "silu", path);
  if (act == "silu") {
    m.activation = ModelConfig::Activation::SiLU;
  } else if (act == "gelu_tanh") {
    m.activation = ModelConfig::Activation::GeluTanh;
  } else {
    throw Error(fmt::format("{}: config field 'activation' = '{}' is not one of silu, gelu_tanh",
                            path, act));
  }
  m.embd_scale = opt<float>(c, "embd_scale", 1.0f, path);
  m.attn_scale = opt<float>(c, "attn_scale", 0.0f, path);
  m.attn_softcap = opt<float>(c, "attn_softcap", 0.0f, path);
  m.final_softcap = opt<float>(c, "final_softcap", 0.0f, path);
  m.post_norms = opt<bool>(c, "post_norms", false, path);
  m.rope_freqs_local = opt<std::vector<float>>(c, "rope_freqs_local", {}, path);
  m.layer_rope_local = opt<std::vector<bool>>(c, "layer_rope_local", {}, path);
  m.rope_dim = opt<int>(c, "rope_dim", 0, path);
  m.attn_gate = opt<bool>(c, "attn_gate", false, path);
  m.layer_linear = opt<std::vector<bool>>(c, "layer_linear", {}, path);
  m.lin_k_heads = opt<int>(c, "lin_k_heads", 0, path);
  m.lin_v_heads = opt<int>(c, "lin_v_heads", 0, path);
  m.lin_k_dim = opt<int>(c, "lin_k_dim", 0, path);
  m.lin_v_dim = opt<int>(c, "lin_v_dim", 0, path);
  m.lin_conv = opt<int>(c, "lin_conv", 0, path);
  for (const auto& [key, value] : c.items())
    if (std::find(kKnownKeys.begin(), kKnownKeys.end(), key) == kKnownKeys.end())
      throw Error(fmt::format("{}: config field '{}' is not known to this build (a newer "
                              "converter wrote it); update Krafla",
                              path, key));

  const auto bad = [&](const char* field, const std::string& why) {
    throw Error(fmt::format("{}: config field '{}' {}", path, field, why));
  };
  for (auto [name, v] : {std::pair{"n_vocab", m.n_vocab}, {"dim", m.dim}, {"n_layers", m.n_layers},
                         {"n_heads", m.n_heads}, {"n_kv_heads", m.n_kv_heads},
                         {"head_dim", m.head_dim}, {"ffn_dim", m.ffn_dim}, {"max_ctx", m.max_ctx}})
    if (v <= 0 || v > (1 << 24)) bad(name, fmt::format("= {} is out of range", v));
  if (m.n_heads % m.n_kv_heads != 0)
    bad("n_kv_heads", fmt::format("= {} does not divide n_heads = {}", m.n_kv_heads, m.n_heads));
  if (m.head_dim % 2 != 0) bad("head_dim", "must be even for RoPE");
  if (m.rope_dim == 0) m.rope_dim = m.head_dim;
  if (m.rope_dim < 2 || m.rope_dim > m.head_dim || m.rope_dim % 2 != 0)
    bad("rope_dim", fmt::format("= {} must be even and in 2..head_dim ({})", m.rope_dim, m.head_dim));
  if (m.rope_freqs.size() != static_cast<size_t>(m.rope_dim / 2))
    bad("rope_freqs", fmt::format("has {} entries, expected rope_dim/2 = {}", m.rope_freqs.size(),
                                  m.rope_dim / 2));
  if (m.sliding_window < 0) bad("sliding_window", "is negative");
  if (m.layer_window.empty()) m.layer_window.assign(m.n_layers, m.sliding_window);
  if (m.layer_window.size() != size_t(m.n_layers))
    bad("layer_window", fmt::format("has {} entries for {} layers", m.layer_window.size(), m.n_layers));
  for (int w : m.layer_window)
    if (w < 0) bad("layer_window", "holds a negative window");
  if (m.layer_rope.empty()) m.layer_rope.assign(m.n_layers, true);
  if (m.layer_rope_local.empty()) m.layer_rope_local.assign(m.n_layers, false);
  if (m.layer_rope_local.size() != size_t(m.n_layers))
    bad("layer_rope_local", fmt::format("has {} entries for {} layers", m.layer_rope_local.size(), m.n_layers));
  for (bool local : m.layer_rope_local)
    if (local && m.rope_freqs_local.size() != size_t(m.rope_dim / 2))
      bad("rope_freqs_local", fmt::format("must have rope_dim/2 = {} entries when a layer uses it", m.rope_dim / 2));
  if (m.layer_linear.empty()) m.layer_linear.assign(m.n_layers, false);
  if (m.layer_linear.size() != size_t(m.n_layers))
    bad("layer_linear", fmt::format("has {} entries for {} layers", m.layer_linear.size(), m.n_layers));
  if (m.has_linear()) {
    if (m.arch != "qwen3_5") bad("layer_linear", fmt::format("marks DeltaNet layers in a {} model", m.arch));
    for (auto [name, v] : {std::pair{"lin_k_heads", m.lin_k_heads}, {"lin_v_heads", m.lin_v_heads},
                           {"lin_k_dim", m.lin_k_dim}, {"lin_v_dim", m.lin_v_dim}, {"lin_conv", m.lin_conv}})
      if (v <= 0 || v > (1 << 16)) bad(name, fmt::format("= {} is out of range", v));
    if (m.lin_v_heads % m.lin_k_heads != 0)
      bad("lin_v_heads", fmt::format("= {} is not a multiple of lin_k_heads = {}", m.lin_v_heads, m.lin_k_heads));
  }
  if (m.attn_scale == 0.0f) m.attn_scale = 1.0f / std::sqrt(float(m.head_dim));
  if (!(m.attn_scale > 0)) bad("attn_scale", "must be positive");
  if (m.attn_softcap < 0) bad("attn_softcap", "is negative");
  if (m.final_softcap < 0) bad("final_softcap", "is negative");
  if (m.layer_rope.size() != size_t(m.n_layers))
    bad("layer_rope", fmt::format("has {} entries for {} layers", m.layer_rope.size(), m.n_layers));
  if (!(m.norm_eps > 0 && m.norm_eps < 1)) bad("norm_eps", "is out of range");
  for (int e : m.eos_ids)
    if (e < 0 || e >= m.n_vocab) bad("eos_ids", fmt::format("holds {} outside the vocabulary", e));
  if (m.bos_id >= m.n_vocab) bad("bos_id", "is outside the vocabulary");
  return m;
}

bool ModelConfig::has_linear() const {
  return std::find(layer_linear.begin(), layer_linear.end(), true) != layer_linear.end();
}

int ModelConfig::n_attn_layers() const {
  return n_layers - int(std::count(layer_linear.begin(), layer_linear.end(), true));
}

}  // namespace krafla
