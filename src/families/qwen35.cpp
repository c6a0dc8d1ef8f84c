// Qwen3.5 (dense): gated attention with q/k norms on every full_attention_interval-th layer,
// Gated DeltaNet ("linear attention") layers between, partial RoPE.
#include "families/qwen35.h"

#include <cstring>

#include "base/aligned.h"

namespace krafla {

using nlohmann::json;

// Qwen3.5: gated attention (the gate inside attn_q) with q/k norms, and Gated DeltaNet layers
// on all but every full_attention_interval-th layer (or the attention.recurrent_layers list);
// the multi-token-prediction blocks (nextn_predict_layers, after the others) are not run.
// llama.cpp's DeltaNet has one head size for keys and values (ssm.state_size).
void qwen35_gguf_config(const GgufFile& g, const std::string& p, json& c) {
  const int64_t all = c["n_layers"], n = all - g.integer(p + "nextn_predict_layers", 0);
  if (n <= 0) gguf_fail(g, fmt::format("{}nextn_predict_layers leaves no layers of {}", p, all));
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
      gguf_fail(g, fmt::format("{}attention.recurrent_layers has {} entries for {} layers", p,
                               r->numbers.size(), n));
    for (int64_t i = 0; i < n; ++i) linear[size_t(i)] = r->numbers[size_t(i)] != 0;
  } else {
    const int64_t every = g.integer(p + "full_attention_interval", 4);
    if (every <= 0) gguf_fail(g, fmt::format("{}full_attention_interval {}", p, every));
    for (int64_t i = 0; i < n; ++i) linear[size_t(i)] = (i + 1) % every != 0;
  }
  c["layer_linear"] = linear;
}

namespace {

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
// (ungroup_heads); 0 when there is one value head per key head: no tiling.
int64_t qwen35_tiling(const json& c) {
  const int64_t nk = c["lin_k_heads"], nv = c["lin_v_heads"];
  return nk <= 0 || nv == nk || nv % nk ? 0 : nv / nk;
}

}  // namespace

// The Qwen3.5 matrices qwen35_gguf_relayout reorders (below): attn_q, and the DeltaNet ones
// when their value heads are tiled.
bool qwen35_gguf_reorders(const json& c, const std::string& leaf) {
  if (leaf == "attn_q") return true;
  if (!qwen35_tiling(c)) return false;
  for (const char* l : {"ssm_qkv", "ssm_conv", "ssm_z", "ssm_beta", "ssm_alpha", "ssm_out"})
    if (leaf == l) return true;
  return false;
}

// Qwen3.5's tensors that differ from the .mlb's layout: attn_q holds each head's query rows and
// then its gate rows (split into attn_q and attn_gate), and the DeltaNet value-head tensors are
// in tiled order (ungroup_heads). Returns false for a tensor to take as it is.
bool qwen35_gguf_relayout(const GgufFile& g, const json& c, TensorView v, GgufImport& m) {
  const std::string leaf = v.name.substr(v.name.rfind('.') + 1);
  const std::string prefix = v.name.substr(0, v.name.rfind('.') + 1);
  const uint64_t row_bytes = v.size / uint64_t(v.rows());
  if (leaf == "attn_q") {  // [n_heads · 2 · head_dim, dim]: per head, query then gate rows
    const int64_t hd = c["head_dim"], heads = c["n_heads"];
    if (v.rows() != 2 * hd * heads)
      gguf_fail(g, fmt::format("tensor '{}q.weight' has {} rows, expected 2 x {} heads x {}",
                               prefix, v.rows(), heads, hd));
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
      gguf_fail(g,
                fmt::format("tensor '{}': value head size {} is not a multiple of its blocks ({})",
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
    gguf_fail(g, fmt::format("tensor '{}' is too small for {} value heads of {} values", v.name, nv,
                             unit == 4 || unit == row_bytes ? 1 : vd));
  AlignedBuffer& b = m.owned.emplace_back(v.size);
  std::memcpy(b.data(), v.data, v.size);  // the parts that stay (q and k rows)
  ungroup_heads(v.data, b.data(), first, unit, nk, r, count, stride);
  v.data = b.data();
  v.source = nullptr;  // the file's rows are in the other order
  m.tensors.push_back(std::move(v));
  return true;
}

extern const Family kQwen35{.arch = "qwen3_5",
                            .gguf_arch = "qwen35",
                            .linear_layers = true,
                            .gguf_config = qwen35_gguf_config,
                            .gguf_renames = kQwen35Renames,
                            .gguf_reorders = qwen35_gguf_reorders,
                            .gguf_relayout = qwen35_gguf_relayout};

}  // namespace krafla
