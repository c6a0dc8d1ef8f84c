#include "model/gguf_import.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <thread>

#include "chat/guess.h"
#include "families/family.h"
#include "io/gguf_dequant.h"
#include "kernels/kernels.h"
#include "krafla/error.h"
#include "tokenizer/gguf_tokenizer.h"

namespace krafla {
namespace {

using nlohmann::json;

// The types this build runs, for the error naming one it does not.
const char* supported_types() {
  return kernels::takes(kernels::WType::Q3_H)
             ? "F32, F16, BF16, Q8_0, Q4_0; Q4_1, Q4_K as Q4_M; Q5_0, Q5_1, Q5_K as Q5_M; Q6_K as "
               "Q6_H; Q3_K as Q3_H; IQ4_NL, IQ4_XS as IQ4_NL; Q2_K as Q8_0"
             : "F32, F16, BF16, Q8_0, Q4_0; Q4_1, Q4_K as Q4_M; Q5_0, Q5_1, Q5_K, Q2_K, Q3_K, "
               "Q6_K, IQ4_NL, IQ4_XS as Q8_0";
}

const Family& family_of(const GgufFile& g) {
  const std::string name = g.str("general.architecture");
  if (const Family* f = find_gguf_family(name)) return *f;
  std::vector<std::string> names;
  for (const Family* f : families())
    if (*f->gguf_arch) names.push_back(f->gguf_arch);
  gguf_fail(g, fmt::format("GGUF architecture '{}' is not supported (this build reads: {})", name,
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
    gguf_fail(g,
              fmt::format("{}rope.scaling: yarn needs a positive original_context_length and betas "
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

// Inverse RoPE frequencies as tools/convert/hf_config.py computes them (double, then float), with
// llama.cpp's scalings: linear divides by the factor; llama3-style files carry per-frequency
// divisors in the tensor rope_freqs.weight.
std::vector<double> rope_freqs(const GgufFile& g, const std::string& p, int rope_dim) {
  const double base = g.number(p + "rope.freq_base", 10000.0);
  if (!(base > 0) || !std::isfinite(base))
    gguf_fail(g, fmt::format("{}rope.freq_base {} is not a positive number", p, base));
  std::vector<double> inv(size_t(rope_dim / 2));
  for (size_t i = 0; i < inv.size(); ++i)
    inv[i] = 1.0 / std::pow(base, double(2 * i) / double(rope_dim));
  const std::string kind = g.str(p + "rope.scaling.type", "none");
  if (kind == "linear" || kind == "yarn") {
    const double factor = g.number(p + "rope.scaling.factor");
    if (!(factor > 0))
      gguf_fail(g, fmt::format("{}rope.scaling.factor {} is not positive", p, factor));
    if (kind == "linear") {
      for (double& f : inv) f /= factor;
    } else {
      yarn(g, p, base, rope_dim, factor, inv);
    }
  } else if (kind != "none") {
    gguf_fail(
        g, fmt::format("{}rope.scaling.type '{}' is not supported (none, linear, yarn)", p, kind));
  }
  if (const GgufTensor* t = find_tensor(g, "rope_freqs.weight")) {
    if (t->type != 0 || t->shape != std::vector<int64_t>{int64_t(inv.size())})
      gguf_fail(g, fmt::format("tensor 'rope_freqs.weight' must be F32 [{}]", inv.size()));
    const float* d = reinterpret_cast<const float*>(t->data);
    for (size_t i = 0; i < inv.size(); ++i) {
      if (!(d[i] > 0))
        gguf_fail(g, fmt::format("tensor 'rope_freqs.weight'[{}] is not positive", i));
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

json config_from(const GgufFile& g, const Family& f) {
  const std::string p = std::string(f.gguf_arch) + ".";
  const GgufTensor* embd = find_tensor(g, "token_embd.weight");
  if (!embd || embd->shape.size() != 2)
    gguf_fail(g, "tensor 'token_embd.weight' is missing or not 2-D");
  const int64_t dim = g.integer(p + "embedding_length");
  const int64_t n_heads = g.integer(p + "attention.head_count");
  if (n_heads <= 0)
    gguf_fail(g, fmt::format("{}attention.head_count {} is not positive", p, n_heads));
  const int64_t head_dim = g.integer(p + "attention.key_length", dim / n_heads);
  if (g.integer(p + "attention.value_length", head_dim) != head_dim)
    gguf_fail(g, fmt::format("{}attention.value_length differs from key_length ({})", p, head_dim));
  const int64_t rope_dim = g.integer(p + "rope.dimension_count", head_dim);
  if (rope_dim < 2 || rope_dim > head_dim || rope_dim % 2)
    gguf_fail(g, fmt::format("{}rope.dimension_count {} must be even and in 2..{}", p, rope_dim,
                             head_dim));
  json c;
  c["arch"] = f.arch;
  c["n_vocab"] = embd->shape[0];
  c["dim"] = dim;
  const int64_t n_layers = g.integer(p + "block_count");
  if (n_layers <= 0 || n_layers > (1 << 24))  // before any per-layer list is built
    gguf_fail(g, fmt::format("{}block_count {} is out of range", p, n_layers));
  c["n_layers"] = n_layers;
  c["n_heads"] = n_heads;
  c["n_kv_heads"] = g.integer(p + "attention.head_count_kv", n_heads);
  c["head_dim"] = head_dim;
  // (a model whose every layer is a MoE layer may have no dense MLP size)
  c["ffn_dim"] =
      f.moe_layers ? g.integer(p + "feed_forward_length", 0) : g.integer(p + "feed_forward_length");
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
  if (f.gguf_config) f.gguf_config(g, p, c);
  return c;
}

// The .mlb name of a GGUF tensor name ("" for one the config consumed).
std::string mlb_name(const GgufFile& g, const std::string& name, const Family& f) {
  if (name == "rope_freqs.weight") return "";
  if (name == "token_embd.weight") return "tok_embd";
  for (auto [theirs, ours] : f.gguf_renames)
    if (name.ends_with(theirs)) return name.substr(0, name.size() - strlen(theirs)) + ours;
  constexpr std::string_view kWeight = ".weight", kBias = ".bias";
  if (name.ends_with(kWeight)) return name.substr(0, name.size() - kWeight.size());
  if (name.ends_with(kBias)) return name.substr(0, name.size() - kBias.size()) + "_bias";
  gguf_fail(g, fmt::format("tensor '{}' is neither a .weight nor a .bias", name));
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
    gguf_fail(g, fmt::format("tensor '{}': {} rows do not split into {} heads of even size", t.name,
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
      gguf_fail(g,
                fmt::format("tensor '{}' has type {}, which this build does not run (it runs {})",
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
  const Family& f = family_of(g);
  json config = config_from(g, f);
  const int64_t n_heads = config["n_heads"], n_kv_heads = config["n_kv_heads"];
  for (const GgufTensor& t : g.tensors()) {
    const std::string name = mlb_name(g, t.name, f);
    if (name.empty() || beyond_layers(t.name, config["n_layers"])) continue;
    // 3-D: a MoE layer's experts, [E, rows, cols] (docs/format.md)
    if (t.shape.size() > (f.moe_layers ? 3 : 2))
      gguf_fail(g, fmt::format("tensor '{}' has {} dimensions ({} expected)", t.name,
                               t.shape.size(), f.moe_layers ? "1 to 3" : "1 or 2"));
    TensorView v{name, dtype_of(g, t), t.shape, t.data, t.offset, t.size};
    const std::string leaf = name.substr(name.rfind('.') + 1);
    const bool vector = t.shape.size() == 1;
    GgufTensor src = t;                  // what the q/k un-permutation reads
    AlignedBuffer* rewritten = nullptr;  // the rows rewritten (gguf_rewrite_type)
    if (gguf_can_dequantize(t.type)) {
      if (vector) gguf_fail(g, fmt::format("tensor '{}': a quantized vector", t.name));
      const auto [block, bytes] = dtype_block(v.dtype);
      v.size = uint64_t(v.rows()) * uint64_t(v.cols()) / uint64_t(block) * uint64_t(bytes);
      v.source = t.data;
      v.source_type = t.type;
      v.source_row = t.size / uint64_t(v.rows());
      // Rewritten as it is packed, a block of rows at a time (model.cpp's pack_all), so no
      // whole copy is ever resident; the embedding's row lookups decode the file's bytes. Only
      // what is reordered next (q/k rows, Qwen3.5's heads) is rewritten here.
      const bool reordered = (f.interleaved_qk && (leaf == "attn_q" || leaf == "attn_k")) ||
                             (f.gguf_reorders && f.gguf_reorders(config, leaf));
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
        gguf_fail(g, fmt::format("tensor '{}': a {} vector (norms and biases must be F32, F16 or "
                                 "BF16)",
                                 t.name, dtype_name(v.dtype)));
      AlignedBuffer& b = m.owned.emplace_back(t.size * 2);
      widen(t, b.data());
      v.dtype = DType::F32;
      v.data = b.data();
      v.size = t.size * 2;
    } else if (f.interleaved_qk && (leaf == "attn_q" || leaf == "attn_k")) {
      AlignedBuffer& b = m.owned.emplace_back(src.size);
      deinterleave(src, leaf == "attn_q" ? n_heads : n_kv_heads, b.data(), g);
      v.data = b.data();
      v.source = nullptr;                   // the file's rows are in the other order
      if (rewritten) rewritten->resize(0);  // only the reordered copy is read from now on
    }
    const bool split = f.gguf_relayout && f.gguf_relayout(g, config, v, m);
    // A tensor that lives in a copy now never reads the file's pages again: give them back
    // (a Q4_K_M file's are most of it).
    if (split || v.data != t.data) MappedFile::drop_pages(t.data, t.size);
    if (split && rewritten) rewritten->resize(0);  // the family copied what it keeps
    if (!split) m.tensors.push_back(std::move(v));
  }
  finish(g, std::move(config), m);
  return m;
}

}  // namespace krafla
