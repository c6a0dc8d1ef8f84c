// Reads the normalized config (docs/format.md) and checks that it describes a model this
// build can run, naming the field when it does not. One table of keys drives the reading and
// the refusal of unknown keys; validation (ranges, defaults that depend on other fields, the
// per-layer lists turned into ModelConfig::layers) runs on what was read.
#include "model/config.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <type_traits>
#include <utility>

#include "families/family.h"
#include "krafla/error.h"

namespace krafla {
namespace {

using nlohmann::json;

// The config as read, before validation: the per-layer lists still as the file has them.
struct RawConfig {
  ModelConfig cfg;
  std::vector<int> layer_window;
  std::vector<bool> layer_rope, layer_rope_local, layer_linear, layer_moe;
};

template <typename T>
T as(const json& v, const char* key, const std::string& path) {
  try {
    return v.get<T>();
  } catch (const json::exception&) {
    throw Error(fmt::format("{}: config field '{}' has the wrong type ({})", path, key,
                            v.dump().substr(0, 40)));
  }
}

template <typename M>
struct MemberOf;
template <typename C, typename T>
struct MemberOf<T C::*> {
  using Class = C;
  using Type = T;
};

// Reads a key into a field of ModelConfig or of RawConfig.
template <auto Member>
void into(const json& v, const char* key, const std::string& path, RawConfig& r) {
  using M = MemberOf<decltype(Member)>;
  auto value = as<typename M::Type>(v, key, path);
  if constexpr (std::is_same_v<typename M::Class, ModelConfig>) {
    r.cfg.*Member = std::move(value);
  } else {
    r.*Member = std::move(value);
  }
}

// Checked as soon as it is read: every other field's meaning depends on it.
void read_arch(const json& v, const char* key, const std::string& path, RawConfig& r) {
  r.cfg.arch = as<std::string>(v, key, path);
  if (!find_family(r.cfg.arch)) {
    std::vector<std::string> names;
    for (const Family* f : families()) names.push_back(f->arch);
    throw Error(fmt::format("{}: unknown architecture '{}' (this build runs: {})", path, r.cfg.arch,
                            fmt::join(names, ", ")));
  }
}

void read_activation(const json& v, const char* key, const std::string& path, RawConfig& r) {
  const std::string act = as<std::string>(v, key, path);
  if (act == "silu") {
    r.cfg.activation = ModelConfig::Activation::SiLU;
  } else if (act == "gelu_tanh") {
    r.cfg.activation = ModelConfig::Activation::GeluTanh;
  } else {
    throw Error(fmt::format("{}: config field 'activation' = '{}' is not one of silu, gelu_tanh",
                            path, act));
  }
}

struct Key {
  const char* name;
  bool required;  // else absent means ModelConfig's default
  void (*read)(const json& v, const char* key, const std::string& path, RawConfig& r);
};

// Every key a version-1 config may hold, in the order they are read (and a missing or
// mistyped one reported). A key outside this table comes from a newer converter and names a
// feature this build would silently get wrong, so it is refused.
constexpr bool kRequired = true, kOptional = false;
const Key kKeys[] = {
    {"arch", kRequired, read_arch},
    {"n_vocab", kRequired, into<&ModelConfig::n_vocab>},
    {"dim", kRequired, into<&ModelConfig::dim>},
    {"n_layers", kRequired, into<&ModelConfig::n_layers>},
    {"n_heads", kRequired, into<&ModelConfig::n_heads>},
    {"n_kv_heads", kRequired, into<&ModelConfig::n_kv_heads>},
    {"head_dim", kRequired, into<&ModelConfig::head_dim>},
    {"ffn_dim", kRequired, into<&ModelConfig::ffn_dim>},
    {"norm_eps", kRequired, into<&ModelConfig::norm_eps>},
    {"rope_freqs", kRequired, into<&ModelConfig::rope_freqs>},
    {"rope_attn_factor", kOptional, into<&ModelConfig::rope_attn_factor>},
    {"max_ctx", kRequired, into<&ModelConfig::max_ctx>},
    {"sliding_window", kOptional, into<&ModelConfig::sliding_window>},
    {"tie_embeddings", kRequired, into<&ModelConfig::tie_embeddings>},
    {"bos_id", kOptional, into<&ModelConfig::bos_id>},
    {"eos_ids", kOptional, into<&ModelConfig::eos_ids>},
    {"chat_template", kOptional, into<&ModelConfig::chat_template>},
    {"qkv_bias", kOptional, into<&ModelConfig::qkv_bias>},
    {"qk_norm", kOptional, into<&ModelConfig::qk_norm>},
    {"layer_window", kOptional, into<&RawConfig::layer_window>},
    {"layer_rope", kOptional, into<&RawConfig::layer_rope>},
    {"activation", kOptional, read_activation},
    {"embd_scale", kOptional, into<&ModelConfig::embd_scale>},
    {"attn_scale", kOptional, into<&ModelConfig::attn_scale>},
    {"attn_softcap", kOptional, into<&ModelConfig::attn_softcap>},
    {"final_softcap", kOptional, into<&ModelConfig::final_softcap>},
    {"post_norms", kOptional, into<&ModelConfig::post_norms>},
    {"rope_freqs_local", kOptional, into<&ModelConfig::rope_freqs_local>},
    {"layer_rope_local", kOptional, into<&RawConfig::layer_rope_local>},
    {"rope_dim", kOptional, into<&ModelConfig::rope_dim>},
    {"attn_gate", kOptional, into<&ModelConfig::attn_gate>},
    {"layer_linear", kOptional, into<&RawConfig::layer_linear>},
    {"lin_k_heads", kOptional, into<&ModelConfig::lin_k_heads>},
    {"lin_v_heads", kOptional, into<&ModelConfig::lin_v_heads>},
    {"lin_k_dim", kOptional, into<&ModelConfig::lin_k_dim>},
    {"lin_v_dim", kOptional, into<&ModelConfig::lin_v_dim>},
    {"lin_conv", kOptional, into<&ModelConfig::lin_conv>},
    {"layer_moe", kOptional, into<&RawConfig::layer_moe>},
    {"n_experts", kOptional, into<&ModelConfig::n_experts>},
    {"n_experts_used", kOptional, into<&ModelConfig::n_experts_used>},
    {"expert_ffn_dim", kOptional, into<&ModelConfig::expert_ffn_dim>},
    {"norm_topk_prob", kOptional, into<&ModelConfig::norm_topk_prob>},
    {"shared_expert_ffn_dim", kOptional, into<&ModelConfig::shared_expert_ffn_dim>},
};

RawConfig read_config(const json& c, const std::string& path) {
  RawConfig r;
  for (const Key& k : kKeys) {
    if (c.contains(k.name)) {
      k.read(c[k.name], k.name, path, r);
    } else if (k.required) {
      throw Error(fmt::format("{}: config field '{}' is missing", path, k.name));
    }
  }
  for (const auto& item : c.items()) {
    const std::string& key = item.key();  // (clang 14 cannot capture a structured binding)
    if (std::none_of(std::begin(kKeys), std::end(kKeys),
                     [&](const Key& k) { return key == k.name; }))
      throw Error(
          fmt::format("{}: config field '{}' is not known to this build (a newer "
                      "converter wrote it); update Krafla",
                      path, key));
  }
  return r;
}

[[noreturn]] void bad(const std::string& path, const char* field, const std::string& why) {
  throw Error(fmt::format("{}: config field '{}' {}", path, field, why));
}

// Sizes and heads: the shape every family shares.
// Each named size must be in 1..max.
void check_sizes(const std::string& path, std::initializer_list<std::pair<const char*, int>> sizes,
                 int max) {
  for (auto [name, v] : sizes)
    if (v <= 0 || v > max) bad(path, name, fmt::format("= {} is out of range", v));
}

void validate_shape(ModelConfig& m, const std::string& path) {
  // clang-format off
  check_sizes(path, {{"n_vocab", m.n_vocab}, {"dim", m.dim}, {"n_layers", m.n_layers},
                     {"n_heads", m.n_heads}, {"n_kv_heads", m.n_kv_heads},
                     {"head_dim", m.head_dim}, {"max_ctx", m.max_ctx}},
              1 << 24);
  // clang-format on
  if (m.n_heads % m.n_kv_heads != 0)
    bad(path, "n_kv_heads",
        fmt::format("= {} does not divide n_heads = {}", m.n_kv_heads, m.n_heads));
  if (m.head_dim % 2 != 0) bad(path, "head_dim", "must be even for RoPE");
  if (m.rope_dim == 0) m.rope_dim = m.head_dim;
  if (m.rope_dim < 2 || m.rope_dim > m.head_dim || m.rope_dim % 2 != 0)
    bad(path, "rope_dim",
        fmt::format("= {} must be even and in 2..head_dim ({})", m.rope_dim, m.head_dim));
  if (m.rope_freqs.size() != static_cast<size_t>(m.rope_dim / 2))
    bad(path, "rope_freqs",
        fmt::format("has {} entries, expected rope_dim/2 = {}", m.rope_freqs.size(),
                    m.rope_dim / 2));
  if (m.sliding_window < 0) bad(path, "sliding_window", "is negative");
}

// Fills the per-layer lists' defaults, checks them, and turns them into ModelConfig::layers.
void validate_layers(RawConfig& r, const std::string& path) {
  ModelConfig& m = r.cfg;
  const size_t n = size_t(m.n_layers);
  const auto check_size = [&](const char* field, size_t size) {
    if (size != n) bad(path, field, fmt::format("has {} entries for {} layers", size, n));
  };
  if (r.layer_window.empty()) r.layer_window.assign(n, m.sliding_window);
  check_size("layer_window", r.layer_window.size());
  for (int w : r.layer_window)
    if (w < 0) bad(path, "layer_window", "holds a negative window");
  if (r.layer_rope.empty()) r.layer_rope.assign(n, true);
  if (r.layer_rope_local.empty()) r.layer_rope_local.assign(n, false);
  check_size("layer_rope_local", r.layer_rope_local.size());
  for (bool local : r.layer_rope_local)
    if (local && m.rope_freqs_local.size() != size_t(m.rope_dim / 2))
      bad(path, "rope_freqs_local",
          fmt::format("must have rope_dim/2 = {} entries when a layer uses it", m.rope_dim / 2));
  if (r.layer_linear.empty()) r.layer_linear.assign(n, false);
  check_size("layer_linear", r.layer_linear.size());
  check_size("layer_rope", r.layer_rope.size());
  if (r.layer_moe.empty()) r.layer_moe.assign(n, false);
  check_size("layer_moe", r.layer_moe.size());

  m.layers.resize(n);
  for (size_t l = 0; l < n; ++l) {
    LayerConfig& L = m.layers[l];
    L.kind = r.layer_linear[l] ? LayerConfig::Kind::Linear : LayerConfig::Kind::Attention;
    L.moe = r.layer_moe[l];
    L.window = r.layer_window[l];
    L.rope = !r.layer_rope[l]        ? LayerConfig::Rope::None
             : r.layer_rope_local[l] ? LayerConfig::Rope::Local
                                     : LayerConfig::Rope::Global;
  }
}

// The DeltaNet layers' shape, when the model has any.
void validate_linear(const ModelConfig& m, const std::string& path) {
  if (!m.has_linear()) return;
  if (!find_family(m.arch)->linear_layers)
    bad(path, "layer_linear", fmt::format("marks DeltaNet layers in a {} model", m.arch));
  // clang-format off
  check_sizes(path, {{"lin_k_heads", m.lin_k_heads}, {"lin_v_heads", m.lin_v_heads},
                     {"lin_k_dim", m.lin_k_dim}, {"lin_v_dim", m.lin_v_dim},
                     {"lin_conv", m.lin_conv}},
              1 << 16);
  // clang-format on
  if (m.lin_v_heads % m.lin_k_heads != 0)
    bad(path, "lin_v_heads",
        fmt::format("= {} is not a multiple of lin_k_heads = {}", m.lin_v_heads, m.lin_k_heads));
}

// The MLPs: the dense one's size wherever a layer has one, the experts' shape when the model
// has MoE layers.
void validate_mlp(const ModelConfig& m, const std::string& path) {
  if (m.n_moe_layers() < m.n_layers || m.ffn_dim != 0)
    check_sizes(path, {{"ffn_dim", m.ffn_dim}}, 1 << 24);
  if (!m.has_moe()) return;
  if (!find_family(m.arch)->moe_layers)
    bad(path, "layer_moe", fmt::format("marks Mixture-of-Experts layers in a {} model", m.arch));
  // clang-format off
  check_sizes(path, {{"n_experts", m.n_experts}, {"n_experts_used", m.n_experts_used},
                     {"expert_ffn_dim", m.expert_ffn_dim}}, 1 << 16);
  // clang-format on
  if (m.n_experts_used > m.n_experts)
    bad(path, "n_experts_used",
        fmt::format("= {} is more than n_experts = {}", m.n_experts_used, m.n_experts));
  if (m.shared_expert_ffn_dim < 0 || m.shared_expert_ffn_dim > (1 << 24))
    bad(path, "shared_expert_ffn_dim",
        fmt::format("= {} is out of range", m.shared_expert_ffn_dim));
}

// Scales, caps and token ids.
void validate_scalars(ModelConfig& m, const std::string& path) {
  if (m.attn_scale == 0.0f) m.attn_scale = 1.0f / std::sqrt(float(m.head_dim));
  if (!(m.attn_scale > 0)) bad(path, "attn_scale", "must be positive");
  if (m.attn_softcap < 0) bad(path, "attn_softcap", "is negative");
  if (m.final_softcap < 0) bad(path, "final_softcap", "is negative");
  if (!(m.norm_eps > 0 && m.norm_eps < 1)) bad(path, "norm_eps", "is out of range");
  for (int e : m.eos_ids)
    if (e < 0 || e >= m.n_vocab)
      bad(path, "eos_ids", fmt::format("holds {} outside the vocabulary", e));
  if (m.bos_id >= m.n_vocab) bad(path, "bos_id", "is outside the vocabulary");
}

}  // namespace

ModelConfig parse_config(const nlohmann::json& meta, const std::string& path) {
  if (!meta.contains("config") || !meta["config"].is_object())
    throw Error(fmt::format("{}: metadata has no 'config' object", path));
  RawConfig r = read_config(meta["config"], path);
  validate_shape(r.cfg, path);
  validate_layers(r, path);
  validate_linear(r.cfg, path);
  validate_mlp(r.cfg, path);
  validate_scalars(r.cfg, path);
  return std::move(r.cfg);
}

bool ModelConfig::has_linear() const {
  return std::any_of(layers.begin(), layers.end(),
                     [](const LayerConfig& l) { return l.kind == LayerConfig::Kind::Linear; });
}

bool ModelConfig::has_moe() const { return n_moe_layers() > 0; }

int ModelConfig::n_moe_layers() const {
  return int(
      std::count_if(layers.begin(), layers.end(), [](const LayerConfig& l) { return l.moe; }));
}

int ModelConfig::n_attn_layers() const {
  return int(std::count_if(layers.begin(), layers.end(), [](const LayerConfig& l) {
    return l.kind == LayerConfig::Kind::Attention;
  }));
}

}  // namespace krafla
