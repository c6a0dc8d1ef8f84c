#include "io/gguf_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <thread>

#include "chat/guess.h"
#include "io/gguf_dequant.h"
#include "kernels/kernels.h"
#include "krafla/error.h"

namespace krafla {
namespace {

using nlohmann::json;

// llama.cpp's architecture names and what they become here. llama.cpp rotates llama's q/k in
// interleaved pairs (LLAMA_ROPE_TYPE_NORM), so its converter permutes those rows; the NEOX
// families keep Hugging Face's order.
struct Arch {
  const char* gguf;
  const char* arch;
  bool interleaved_qk;
};
constexpr Arch kArchs[] = {
    {"llama", "llama", true},     {"qwen2", "qwen2", false},   {"qwen3", "qwen3", false},
    {"smollm3", "smollm3", true}, {"gemma2", "gemma2", false}, {"gemma3", "gemma3", false},
    {"qwen35", "qwen3_5", false},
};

// The types this build runs, for the error naming one it does not.
const char* supported_types() {
  return kernels::takes(kernels::WType::Q3_H)
             ? "F32, F16, BF16, Q8_0, Q4_0; Q4_1, Q4_K as Q4_M; Q5_0, Q5_1, Q5_K as Q5_M; Q6_K as "
               "Q6_H; Q3_K as Q3_H; IQ4_NL, IQ4_XS as IQ4_NL; Q2_K as Q8_0"
             : "F32, F16, BF16, Q8_0, Q4_0; Q4_1, Q4_K as Q4_M; Q5_0, Q5_1, Q5_K, Q2_K, Q3_K, "
               "Q6_K, IQ4_NL, IQ4_XS as Q8_0";
}

[[noreturn]] void fail(const GgufFile& g, const std::string& msg) {
  throw Error(fmt::format("{}: {}", g.path(), msg));
}

const Arch& arch_of(const GgufFile& g) {
  const std::string name = g.str("general.architecture");
  for (const auto& a : kArchs)
    if (name == a.gguf) return a;
  std::vector<std::string> names;
  for (const auto& a : kArchs) names.push_back(a.gguf);
  fail(g, fmt::format("GGUF architecture '{}' is not supported (this build reads: {})", name,
                      fmt::join(names, ", ")));
}

const GgufTensor* find_tensor(const GgufFile& g, std::string_view name) {
  for (const auto& t : g.tensors())
    if (t.name == name) return &t;
  return nullptr;
}

// YaRN (transformers' _compute_yarn_parameters, which llama.cpp's rope_yarn matches): the
// frequencies below the correction range keep their value, those above are divided by the
// factor, a linear ramp between; corr_dim(r) = d·ln(orig / (2π r)) / (2 ln base) for
// r = beta_fast (32) and beta_slow (1), floored and ceiled. llama.cpp scales cos and sin by
// 1 + 0.1 ln(factor): the config's rope_attn_factor (config_from).
void yarn(const GgufFile& g, const std::string& p, double base, int dim, double factor,
          std::vector<double>& inv) {
  const double orig = double(g.integer(p + "rope.scaling.original_context_length"));
  const double fast = g.number(p + "rope.scaling.yarn_beta_fast", 32.0);
  const double slow = g.number(p + "rope.scaling.yarn_beta_slow", 1.0);
  if (!(orig > 0 && fast > 0 && slow > 0 && base != 1))
    fail(g, fmt::format("{}rope.scaling: yarn needs a positive original_context_length and betas "
                        "and a base other than 1",
                        p));
  const auto corr = [&](double r) {
    return dim * std::log(orig / (r * 2 * std::numbers::pi)) / (2 * std::log(base));
  };
  double low = std::max(0.0, std::floor(corr(fast)));
  double high = std::min(double(dim - 1), std::ceil(corr(slow)));
  if (low == high) high += 0.001;
  for (size_t i = 0; i < inv.size(); ++i) {
    const double ramp = std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    const double extra = 1.0 - ramp;
    inv[i] = inv[i] / factor * (1 - extra) + inv[i] * extra;
  }
}

// Inverse RoPE frequencies as tools/hf_config.py computes them (double, then float), with
// llama.cpp's scalings: linear divides by the factor; llama3-style files carry per-frequency
// divisors in the tensor rope_freqs.weight.
std::vector<double> rope_freqs(const GgufFile& g, const std::string& p, int rope_dim) {
  const double base = g.number(p + "rope.freq_base", 10000.0);
  if (!(base > 0) || !std::isfinite(base))
    fail(g, fmt::format("{}rope.freq_base {} is not a positive number", p, base));
  std::vector<double> inv(size_t(rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0 / std::pow(base, double(2 * i) / double(rope_dim));
  const std::string kind = g.str(p + "rope.scaling.type", "none");
  if (kind == "linear" || kind == "yarn") {
    const double factor = g.number(p + "rope.scaling.factor");
    if (!(factor > 0)) fail(g, fmt::format("{}rope.scaling.factor {} is not positive", p, factor));
    if (kind == "linear") {
      for (double& f : inv) f /= factor;
    } else {
      yarn(g, p, base, rope_dim, factor, inv);
    }
  } else if (kind != "none") {
    fail(g, fmt::format("{}rope.scaling.type '{}' is not supported (none, linear, yarn)", p, kind));
  }
  if (const GgufTensor* t = find_tensor(g, "rope_freqs.weight")) {
    if (t->type != 0 || t->shape != std::vector<int64_t>{int64_t(inv.size())})
      fail(g, fmt::format("tensor 'rope_freqs.weight' must be F32 [{}]", inv.size()));
    const float* d = reinterpret_cast<const float*>(t->data);
    for (size_t i = 0; i < inv.size(); ++i) {
      if (!(d[i] > 0)) fail(g, fmt::format("tensor 'rope_freqs.weight'[{}] is not positive", i));
      inv[i] /= d[i];
    }
  }
  return inv;
}

std::vector<int> eos_ids(const GgufFile& g) {
  std::vector<int> ids;
  for (const char* key : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id",
                          "tokenizer.ggml.eom_token_id"}) {
    const int64_t id = g.integer(key, -1);
    if (id >= 0 && std::find(ids.begin(), ids.end(), int(id)) == ids.end()) ids.push_back(int(id));
  }
  return ids;
}

// Gemma 2/3 as llama.cpp runs them: GELU, embeddings times sqrt(dim), sandwich norms (stored
// as 1 + w, as in a .mlb), soft-caps (Gemma 2), a sliding window on the layers of a period
// (il % period < period - 1; Gemma 2: period 2, window 4096; Gemma 3: period 6 when a window is
// given), Gemma 3's local layers with their own unscaled RoPE base (freq_base_swa, 10000), and
// the query scale of gemma_pytorch: 1/sqrt(dim/heads) for the 27B models, else 1/sqrt(head_dim).
void gemma_config(const GgufFile& g, const std::string& p, json& c) {
  const bool g2 = c["arch"] == "gemma2";
  const int64_t n = c["n_layers"], dim = c["dim"], heads = c["n_heads"];
  c["activation"] = "gelu_tanh";
  c["embd_scale"] = float(std::sqrt(double(dim)));
  c["post_norms"] = true;
  c["tie_embeddings"] = true;
  if (g2) {
    c["attn_softcap"] = g.number(p + "attn_logit_softcapping", 50.0);
    c["final_softcap"] = g.number(p + "final_logit_softcapping", 30.0);
  } else {
    c["qk_norm"] = true;
    c["final_softcap"] = g.number(p + "final_logit_softcapping", 0.0);
  }
  const bool is_27b = n == (g2 ? 46 : 62);
  c["attn_scale"] = 1.0 / std::sqrt(double(is_27b ? dim / heads : c["head_dim"].get<int64_t>()));
  const int64_t window = g.integer(p + "attention.sliding_window", g2 ? 4096 : 0);
  if (window <= 0) return;
  const GgufValue* pat = g.find(p + "attention.sliding_window_pattern");
  std::vector<bool> sliding(static_cast<size_t>(n));
  if (pat && pat->type == GgufType::Array) {
    if (pat->numbers.size() != size_t(n))
      fail(g, fmt::format("{}attention.sliding_window_pattern has {} entries for {} layers", p,
                          pat->numbers.size(), n));
    for (int64_t i = 0; i < n; ++i) sliding[size_t(i)] = pat->numbers[size_t(i)] != 0;
  } else {
    const int64_t period = pat ? g.integer(p + "attention.sliding_window_pattern") : g2 ? 2 : 6;
    if (period <= 0) fail(g, fmt::format("{}attention.sliding_window_pattern {}", p, period));
    for (int64_t i = 0; i < n; ++i) sliding[size_t(i)] = i % period < period - 1;
  }
  std::vector<int64_t> windows;
  for (bool s : sliding) windows.push_back(s ? window : 0);
  c["layer_window"] = windows;
  if (!g2) {
    const int rope_dim = int(c.value("rope_dim", c["head_dim"].get<int64_t>()));
    const double base = g.number(p + "rope.freq_base_swa", 10000.0);
    std::vector<double> local(size_t(rope_dim / 2));
    for (size_t i = 0; i < local.size(); ++i)
      local[i] = 1.0 / std::pow(base, double(2 * i) / double(rope_dim));
    c["rope_freqs_local"] = local;
    c["layer_rope_local"] = sliding;
  }
}

// Qwen3.5: gated attention (the gate inside attn_q) with q/k norms, and Gated DeltaNet layers
// on all but every full_attention_interval-th layer (or the attention.recurrent_layers list);
// the multi-token-prediction blocks (nextn_predict_layers, after the others) are not run.
// llama.cpp's DeltaNet has one head size for keys and values (ssm.state_size).
void qwen35_config(const GgufFile& g, const std::string& p, json& c) {
  const int64_t all = c["n_layers"], n = all - g.integer(p + "nextn_predict_layers", 0);
  if (n <= 0) fail(g, fmt::format("{}nextn_predict_layers leaves no layers of {}", p, all));
  c["n_layers"] = n;
  c["attn_gate"] = true;
  c["qk_norm"] = true;
  const int64_t v_heads = g.integer(p + "ssm.time_step_rank");
  c["lin_k_heads"] = g.integer(p + "ssm.group_count");
  c["lin_v_heads"] = v_heads;
  c["lin_k_dim"] = g.integer(p + "ssm.state_size");
  c["lin_v_dim"] = v_heads > 0 ? g.integer(p + "ssm.inner_size") / v_heads : 0;
  c["lin_conv"] = g.integer(p + "ssm.conv_kernel");
  std::vector<bool> linear(static_cast<size_t>(n));
  if (const GgufValue* r = g.find(p + "attention.recurrent_layers");
      r && r->type == GgufType::Array) {
    if (r->numbers.size() < size_t(n))
      fail(g, fmt::format("{}attention.recurrent_layers has {} entries for {} layers", p,
                          r->numbers.size(), n));
    for (int64_t i = 0; i < n; ++i) linear[size_t(i)] = r->numbers[size_t(i)] != 0;
  } else {
    const int64_t every = g.integer(p + "full_attention_interval", 4);
    if (every <= 0) fail(g, fmt::format("{}full_attention_interval {}", p, every));
    for (int64_t i = 0; i < n; ++i) linear[size_t(i)] = (i + 1) % every != 0;
  }
  c["layer_linear"] = linear;
}

// The renderer for tokenizer.chat_template (--chat auto), as the converter names it for a .mlb.
std::string chat_template_name(const GgufFile& g) {
  const GgufValue* t = g.find("tokenizer.chat_template");
  const std::string tmpl = t && t->type == GgufType::String ? t->s : "";
  // The vocabulary is asked about at most a few strings, and only without a telling template.
  static const std::vector<std::string> kNone;
  const GgufValue* tokens = g.find("tokenizer.ggml.tokens");
  const std::vector<std::string>& vocab = tokens ? tokens->strings : kNone;
  return guess_chat_template(
      tmpl,
      [&](std::string_view s) { return std::find(vocab.begin(), vocab.end(), s) != vocab.end(); },
      vocab.size());
}

json config_from(const GgufFile& g, const Arch& a) {
  const std::string p = std::string(a.gguf) + ".";
  const GgufTensor* embd = find_tensor(g, "token_embd.weight");
  if (!embd || embd->shape.size() != 2) fail(g, "tensor 'token_embd.weight' is missing or not 2-D");
  const int64_t dim = g.integer(p + "embedding_length");
  const int64_t n_heads = g.integer(p + "attention.head_count");
  if (n_heads <= 0) fail(g, fmt::format("{}attention.head_count {} is not positive", p, n_heads));
  const int64_t head_dim = g.integer(p + "attention.key_length", dim / n_heads);
  if (g.integer(p + "attention.value_length", head_dim) != head_dim)
    fail(g, fmt::format("{}attention.value_length differs from key_length ({})", p, head_dim));
  const int64_t rope_dim = g.integer(p + "rope.dimension_count", head_dim);
  if (rope_dim < 2 || rope_dim > head_dim || rope_dim % 2)
    fail(g,
         fmt::format("{}rope.dimension_count {} must be even and in 2..{}", p, rope_dim, head_dim));
  json c;
  c["arch"] = a.arch;
  c["n_vocab"] = embd->shape[0];
  c["dim"] = dim;
  const int64_t n_layers = g.integer(p + "block_count");
  if (n_layers <= 0 || n_layers > (1 << 24))  // before any per-layer list is built
    fail(g, fmt::format("{}block_count {} is out of range", p, n_layers));
  c["n_layers"] = n_layers;
  c["n_heads"] = n_heads;
  c["n_kv_heads"] = g.integer(p + "attention.head_count_kv", n_heads);
  c["head_dim"] = head_dim;
  c["ffn_dim"] = g.integer(p + "feed_forward_length");
  c["norm_eps"] = g.number(p + "attention.layer_norm_rms_epsilon");
  c["rope_freqs"] = rope_freqs(g, p, int(rope_dim));
  if (g.str(p + "rope.scaling.type", "none") == "yarn")
    c["rope_attn_factor"] =
        std::max(1.0, 1.0 + 0.1 * std::log(g.number(p + "rope.scaling.factor")));
  if (rope_dim != head_dim) c["rope_dim"] = rope_dim;
  c["max_ctx"] = g.integer(p + "context_length");
  if (const int64_t w = g.integer(p + "attention.sliding_window", 0)) c["sliding_window"] = w;
  c["tie_embeddings"] = find_tensor(g, "output.weight") == nullptr;
  c["bos_id"] = g.integer("tokenizer.ggml.bos_token_id", -1);
  c["eos_ids"] = eos_ids(g);
  c["chat_template"] = chat_template_name(g);
  if (std::string(a.arch) == "qwen2") c["qkv_bias"] = true;
  if (std::string(a.arch) == "qwen3") c["qk_norm"] = true;
  if (std::string(a.arch) == "smollm3") {
    // llama.cpp's SmolLM3: every fourth layer has no RoPE (n_no_rope_layer_step)
    std::vector<bool> rope;
    for (int64_t i = 0; i < c["n_layers"].get<int64_t>(); ++i) rope.push_back((i + 1) % 4 != 0);
    c["layer_rope"] = rope;
  }
  if (std::string(a.arch).starts_with("gemma")) gemma_config(g, p, c);
  if (std::string(a.arch) == "qwen3_5") qwen35_config(g, p, c);
  return c;
}

// The .mlb name of a GGUF tensor name ("" for one the config consumed).
std::string mlb_name(const GgufFile& g, const std::string& name, const Arch& a) {
  if (name == "rope_freqs.weight") return "";
  if (name == "token_embd.weight") return "tok_embd";
  if (std::string(a.arch) == "qwen3_5") {
    // the norm before the MLP (not a sandwich norm), the DeltaNet tensors' names
    for (auto [theirs, ours] :
         {std::pair{".post_attention_norm.weight", ".ffn_norm"},
          std::pair{".attn_qkv.weight", ".ssm_qkv"}, std::pair{".attn_gate.weight", ".ssm_z"},
          std::pair{".ssm_conv1d.weight", ".ssm_conv"}, std::pair{".ssm_a", ".ssm_a"}})
      if (name.ends_with(theirs)) return name.substr(0, name.size() - strlen(theirs)) + ours;
  }
  // Gemma's sandwich norms
  for (auto [theirs, ours] : {std::pair{".post_attention_norm.weight", ".attn_post_norm"},
                              std::pair{".post_ffw_norm.weight", ".ffn_post_norm"}})
    if (name.ends_with(theirs)) return name.substr(0, name.size() - strlen(theirs)) + ours;
  constexpr std::string_view kWeight = ".weight", kBias = ".bias";
  if (name.ends_with(kWeight)) return name.substr(0, name.size() - kWeight.size());
  if (name.ends_with(kBias)) return name.substr(0, name.size() - kBias.size()) + "_bias";
  fail(g, fmt::format("tensor '{}' is neither a .weight nor a .bias", name));
}

// Widens a BF16 or F16 tensor to F32 (both exactly).
void widen(const GgufTensor& t, uint8_t* out) {
  const int64_t n = int64_t(t.size / 2);
  const uint16_t* s = reinterpret_cast<const uint16_t*>(t.data);
  float* d = reinterpret_cast<float*>(out);
  if (t.type == 1) {
    kernels::f16_to_f32(s, d, n);
    return;
  }
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t u = uint32_t(s[i]) << 16;
    std::memcpy(d + i, &u, 4);
  }
}

// Rows of each head from llama.cpp's interleaved pairs (2i, 2i+1) back to rotate_half's
// (i, i + head_dim/2): the inverse of its converter's permute().
void deinterleave(const GgufTensor& t, int64_t n_heads, uint8_t* out, const GgufFile& g) {
  const int64_t rows = t.shape[0];
  if (n_heads <= 0 || rows % n_heads || (rows / n_heads) % 2)
    fail(g, fmt::format("tensor '{}': {} rows do not split into {} heads of even size", t.name,
                        rows, n_heads));
  const int64_t hd = rows / n_heads;
  const uint64_t row_bytes = t.size / uint64_t(rows);
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < hd / 2; ++i)
      for (int s = 0; s < 2; ++s)
        std::memcpy(out + uint64_t(h * hd + s * hd / 2 + i) * row_bytes,
                    t.data + uint64_t(h * hd + 2 * i + s) * row_bytes, row_bytes);
}

// A block of a layer past n_layers (Qwen3.5's multi-token-prediction block) or a nextn tensor.
bool beyond_layers(const std::string& name, int64_t n_layers) {
  if (name.find("nextn") != std::string::npos) return true;
  if (!name.starts_with("blk.")) return false;
  return std::strtoll(name.c_str() + 4, nullptr, 10) >= n_layers;
}

// llama.cpp stores Qwen3.5's value heads "tiled" (v·n_k + g for value head v of key head g) for
// its broadcasts; Hugging Face and the .mlb group them (g·r + v, r = n_v / n_k). Moves the
// chunks of `unit` bytes that make one head, the heads starting at byte `first`, `count`
// times `stride` bytes apart (rows: count 1; columns: once per row).
void ungroup_heads(const uint8_t* src, uint8_t* dst, uint64_t first, uint64_t unit, int64_t nk,
                   int64_t r, int64_t count, uint64_t stride) {
  for (int64_t c = 0; c < count; ++c)
    for (int64_t gk = 0; gk < nk; ++gk)
      for (int64_t v = 0; v < r; ++v)
        std::memcpy(dst + c * stride + first + uint64_t(gk * r + v) * unit,
                    src + c * stride + first + uint64_t(v * nk + gk) * unit, unit);
}

// Value heads per key head when Qwen3.5's DeltaNet value-head tensors are in tiled order
// (ungroup_heads below); 0 when there is one value head per key head: no tiling.
int64_t qwen35_tiling(const json& c) {
  const int64_t nk = c["lin_k_heads"], nv = c["lin_v_heads"];
  return nk <= 0 || nv == nk || nv % nk ? 0 : nv / nk;
}

// The Qwen3.5 matrices qwen35_tensor reorders (below): attn_q, and the DeltaNet ones when
// their value heads are tiled.
bool qwen35_reorders(const json& c, const std::string& leaf) {
  if (leaf == "attn_q") return true;
  if (!qwen35_tiling(c)) return false;
  for (const char* l : {"ssm_qkv", "ssm_conv", "ssm_z", "ssm_beta", "ssm_alpha", "ssm_out"})
    if (leaf == l) return true;
  return false;
}

// Qwen3.5's tensors that differ from the .mlb's layout: attn_q holds each head's query rows and
// then its gate rows (split into attn_q and attn_gate), and the DeltaNet value-head tensors are
// in tiled order (ungroup_heads). Returns false for a tensor to take as it is.
bool qwen35_tensor(const GgufFile& g, const json& c, TensorView v, GgufImport& m) {
  const std::string leaf = v.name.substr(v.name.rfind('.') + 1);
  const std::string prefix = v.name.substr(0, v.name.rfind('.') + 1);
  const uint64_t row_bytes = v.size / uint64_t(v.rows());
  if (leaf == "attn_q") {  // [n_heads · 2 · head_dim, dim]: per head, query then gate rows
    const int64_t hd = c["head_dim"], heads = c["n_heads"];
    if (v.rows() != 2 * hd * heads)
      fail(g, fmt::format("tensor '{}q.weight' has {} rows, expected 2 x {} heads x {}", prefix,
                          v.rows(), heads, hd));
    const uint64_t half = v.size / 2, head = uint64_t(hd) * row_bytes;
    AlignedBuffer& q = m.owned.emplace_back(half);
    AlignedBuffer& gate = m.owned.emplace_back(half);
    for (int64_t h = 0; h < heads; ++h) {
      std::memcpy(q.data() + h * head, v.data + 2 * h * head, head);
      std::memcpy(gate.data() + h * head, v.data + (2 * h + 1) * head, head);
    }
    const std::vector<int64_t> shape{hd * heads, v.cols()};
    for (auto [name, data] : {std::pair{v.name, q.data()}, {prefix + "attn_gate", gate.data()}}) {
      TensorView part{name, v.dtype, shape, data, v.offset, half};
      part.source_type = v.source_type;  // what it was in the file (ml_tok info)
      m.tensors.push_back(std::move(part));
    }
    return true;
  }
  const int64_t nk = c["lin_k_heads"], nv = c["lin_v_heads"], vd = c["lin_v_dim"];
  const int64_t kd = c["lin_k_dim"];
  const int64_t r = qwen35_tiling(c);
  if (!r) return false;
  uint64_t first = 0, unit = 0, stride = 0;
  int64_t count = 1;
  if (leaf == "ssm_qkv" || leaf == "ssm_conv") {  // rows: q, k (unchanged), then v heads
    first = uint64_t(2 * nk * kd) * row_bytes;
    unit = uint64_t(vd) * row_bytes;
  } else if (leaf == "ssm_z") {
    unit = uint64_t(vd) * row_bytes;
  } else if (leaf == "ssm_beta" || leaf == "ssm_alpha") {
    unit = row_bytes;
  } else if (leaf == "ssm_dt_bias" || leaf == "ssm_a") {
    unit = 4;                      // F32 vectors, one value per head
  } else if (leaf == "ssm_out") {  // columns: value heads of vd elements
    const auto [block, bytes] = dtype_block(v.dtype);
    if (vd % block)
      fail(g, fmt::format("tensor '{}': value head size {} is not a multiple of its blocks ({})",
                          v.name, vd, block));
    unit = uint64_t(vd / block * bytes);
    count = v.rows();
    stride = row_bytes;
  } else {
    return false;
  }
  // the heads moved must lie inside the tensor (its shape is checked only later, by the loader)
  const uint64_t span = first + uint64_t(nv) * unit;
  if (span > (count == 1 ? v.size : row_bytes))
    fail(g, fmt::format("tensor '{}' is too small for {} value heads of {} values", v.name, nv,
                        unit == 4 || unit == row_bytes ? 1 : vd));
  AlignedBuffer& b = m.owned.emplace_back(v.size);
  std::memcpy(b.data(), v.data, v.size);  // the parts that stay (q and k rows)
  ungroup_heads(v.data, b.data(), first, unit, nk, r, count, stride);
  v.data = b.data();
  v.source = nullptr;  // the file's rows are in the other order
  m.tensors.push_back(std::move(v));
  return true;
}

// A matrix of a type without kernels of its own rewritten whole (to be reordered): threads
// split the rows, and each row's result does not depend on the split.
void rewrite_rows(const GgufTensor& t, uint8_t* out) {
  const int64_t rows = t.shape[0], cols = t.shape[1];
  const uint64_t in_row = t.size / uint64_t(rows);
  const uint64_t out_row = kernels::row_bytes(gguf_rewrite_type(t.type), cols);
  const int n = std::max(1, std::min<int>(int(std::thread::hardware_concurrency()), 16));
  std::vector<std::thread> workers;
  for (int w = 0; w < n; ++w)
    workers.emplace_back([&, w] {
      const int64_t r0 = rows * w / n, r1 = rows * (w + 1) / n;
      gguf_rewrite_rows(t.type, t.data + uint64_t(r0) * in_row, in_row, cols, r1 - r0,
                        out + uint64_t(r0) * out_row);
    });
  for (auto& th : workers) th.join();
}

DType dtype_of(const GgufFile& g, const GgufTensor& t) {
  if (gguf_can_dequantize(t.type))  // rewritten as it is packed, as gguf_rewrite_type says
    switch (gguf_rewrite_type(t.type)) {
      case kernels::WType::Q4_M:
        return DType::Q4_M;
      case kernels::WType::Q6_H:
        return DType::Q6_H;
      case kernels::WType::Q5_M:
        return DType::Q5_M;
      case kernels::WType::IQ4_NL:
        return DType::IQ4_NL;
      case kernels::WType::Q3_H:
        return DType::Q3_H;
      default:
        return DType::Q8_0;
    }
  switch (t.type) {
    case 0:
      return DType::F32;
    case 1:
      return DType::F16;
    case 2:
      return DType::Q4_0;
    case 8:
      return DType::Q8_0;
    case 30:
      return DType::BF16;
    default: {
      const GgmlTypeInfo* ti = ggml_type_info(t.type);
      fail(g, fmt::format("tensor '{}' has type {}, which this build does not run (it runs {})",
                          t.name, ti ? ti->name : "?", supported_types()));
    }
  }
}

void add_bytes(GgufImport& m, const std::string& name, const std::string& text) {
  AlignedBuffer& b = m.owned.emplace_back(text.size());
  std::memcpy(b.data(), text.data(), text.size());
  m.tensors.push_back({name, DType::Bytes, {int64_t(text.size())}, b.data(), 0, text.size()});
}

// Adds the tokenizer files and the .mlb-shaped metadata: a model with `config`, or without one
// (a vocabulary-only file, as llama.cpp's ggml-vocab-*.gguf) a tokenizer file.
void finish(const GgufFile& g, json config, GgufImport& m) {
  const TokenizerFiles tok = gguf_tokenizer_files(g);
  add_bytes(m, "tokenizer.json", tok.json);
  add_bytes(m, "tokenizer_config.json", tok.config);
  json tensors = json::array();
  for (const auto& t : m.tensors)
    tensors.push_back({{"name", t.name},
                       {"dtype", dtype_name(t.dtype)},
                       {"shape", t.shape},
                       {"offset", t.offset},
                       {"size", t.size}});
  m.meta = {{"format", "krafla-mlb"},
            {"kind", config.is_null() ? "tokenizer" : "model"},
            {"tokenizer", {{"json", "tokenizer.json"}, {"config", "tokenizer_config.json"}}},
            {"tensors", tensors},
            {"source",
             {{"format", "gguf"},
              {"gguf_version", g.version()},
              {"architecture", g.str("general.architecture", "")},
              {"name", g.str("general.name", "")},
              {"file_type", g.integer("general.file_type", -1)}}}};
  if (!config.is_null()) m.meta["config"] = std::move(config);
}

}  // namespace

GgufImport import_gguf(const GgufFile& g) {
  GgufImport m;
  if (g.tensors().empty()) {
    finish(g, nullptr, m);
    return m;
  }
  const Arch& a = arch_of(g);
  json config = config_from(g, a);
  const int64_t n_heads = config["n_heads"], n_kv_heads = config["n_kv_heads"];
  for (const GgufTensor& t : g.tensors()) {
    const std::string name = mlb_name(g, t.name, a);
    if (name.empty() || beyond_layers(t.name, config["n_layers"])) continue;
    if (t.shape.size() > 2)
      fail(g,
           fmt::format("tensor '{}' has {} dimensions (1 or 2 expected)", t.name, t.shape.size()));
    TensorView v{name, dtype_of(g, t), t.shape, t.data, t.offset, t.size};
    const std::string leaf = name.substr(name.rfind('.') + 1);
    const bool vector = t.shape.size() == 1;
    GgufTensor src = t;                  // what the q/k un-permutation reads
    AlignedBuffer* rewritten = nullptr;  // the rows rewritten (gguf_rewrite_type)
    if (gguf_can_dequantize(t.type)) {
      if (vector) fail(g, fmt::format("tensor '{}': a quantized vector", t.name));
      const auto [block, bytes] = dtype_block(v.dtype);
      v.size = uint64_t(t.shape[0]) * uint64_t(t.shape[1]) / uint64_t(block) * uint64_t(bytes);
      v.source = t.data;
      v.source_type = t.type;
      v.source_row = t.size / uint64_t(t.shape[0]);
      // Rewritten as it is packed, a block of rows at a time (model.cpp's pack_all), so no
      // whole copy is ever resident; the embedding's row lookups decode the file's bytes. Only
      // what is reordered next (q/k rows, Qwen3.5's heads) is rewritten here.
      const bool reordered = (a.interleaved_qk && (leaf == "attn_q" || leaf == "attn_k")) ||
                             (std::string(a.arch) == "qwen3_5" && qwen35_reorders(config, leaf));
      if (!reordered) {
        v.data = nullptr;
      } else {
        rewritten = &m.owned.emplace_back(v.size);
        rewrite_rows(t, rewritten->data());
        v.data = src.data = rewritten->data();
        src.size = v.size;
      }
    }
    const bool conv = leaf == "ssm_conv" && v.dtype == DType::F16;  // the loader wants F32
    if ((vector && v.dtype != DType::F32) || v.dtype == DType::BF16 || conv) {
      if (v.dtype != DType::F16 && v.dtype != DType::BF16)
        fail(g, fmt::format("tensor '{}': a {} vector (norms and biases must be F32, F16 or "
                            "BF16)",
                            t.name, dtype_name(v.dtype)));
      AlignedBuffer& b = m.owned.emplace_back(t.size * 2);
      widen(t, b.data());
      v.dtype = DType::F32;
      v.data = b.data();
      v.size = t.size * 2;
    } else if (a.interleaved_qk && (leaf == "attn_q" || leaf == "attn_k")) {
      AlignedBuffer& b = m.owned.emplace_back(src.size);
      deinterleave(src, leaf == "attn_q" ? n_heads : n_kv_heads, b.data(), g);
      v.data = b.data();
      v.source = nullptr;                   // the file's rows are in the other order
      if (rewritten) rewritten->resize(0);  // only the reordered copy is read from now on
    }
    const bool split = std::string(a.arch) == "qwen3_5" && qwen35_tensor(g, config, v, m);
    // A tensor that lives in a copy now never reads the file's pages again: give them back
    // (a Q4_K_M file's are most of it).
    if (split || v.data != t.data) MappedFile::drop_pages(t.data, t.size);
    if (split && rewritten) rewritten->resize(0);  // qwen35_tensor copied what it keeps
    if (!split) m.tensors.push_back(std::move(v));
  }
  finish(g, std::move(config), m);
  return m;
}

}  // namespace krafla
