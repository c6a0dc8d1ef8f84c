#include "families/gemma.h"

#include <cmath>

namespace krafla {

// Gemma 2/3 as llama.cpp runs them: GELU, embeddings times sqrt(dim), sandwich norms (stored
// as 1 + w, as in a .mlb), soft-caps (Gemma 2), a sliding window on the layers of a period
// (il % period < period - 1; Gemma 2: period 2, window 4096; Gemma 3: period 6 when a window is
// given), Gemma 3's local layers with their own unscaled RoPE base (freq_base_swa, 10000), and
// the query scale of gemma_pytorch: 1/sqrt(dim/heads) for the 27B models, else 1/sqrt(head_dim).
void gemma_gguf_config(const GgufFile& g, const std::string& p, nlohmann::json& c, bool v2) {
  const int64_t n = c["n_layers"], dim = c["dim"], heads = c["n_heads"];
  c["activation"] = "gelu_tanh";
  c["embd_scale"] = float(std::sqrt(double(dim)));
  c["post_norms"] = true;
  c["tie_embeddings"] = true;
  if (v2) {
    c["attn_softcap"] = g.number(p + "attn_logit_softcapping", 50.0);
    c["final_softcap"] = g.number(p + "final_logit_softcapping", 30.0);
  } else {
    c["qk_norm"] = true;
    c["final_softcap"] = g.number(p + "final_logit_softcapping", 0.0);
  }
  const bool is_27b = n == (v2 ? 46 : 62);
  c["attn_scale"] = 1.0 / std::sqrt(double(is_27b ? dim / heads : c["head_dim"].get<int64_t>()));
  const int64_t window = g.integer(p + "attention.sliding_window", v2 ? 4096 : 0);
  if (window <= 0) return;
  const GgufValue* pat = g.find(p + "attention.sliding_window_pattern");
  std::vector<bool> sliding(static_cast<size_t>(n));
  if (pat && pat->type == GgufType::Array) {
    if (pat->numbers.size() != size_t(n))
      gguf_fail(g, fmt::format("{}attention.sliding_window_pattern has {} entries for {} layers", p,
                               pat->numbers.size(), n));
    for (int64_t i = 0; i < n; ++i) sliding[size_t(i)] = pat->numbers[size_t(i)] != 0;
  } else {
    const int64_t period = pat ? g.integer(p + "attention.sliding_window_pattern") : v2 ? 2 : 6;
    if (period <= 0) gguf_fail(g, fmt::format("{}attention.sliding_window_pattern {}", p, period));
    for (int64_t i = 0; i < n; ++i) sliding[size_t(i)] = i % period < period - 1;
  }
  std::vector<int64_t> windows;
  for (bool s : sliding) windows.push_back(s ? window : 0);
  c["layer_window"] = windows;
  if (!v2) {
    const int rope_dim = int(c.value("rope_dim", c["head_dim"].get<int64_t>()));
    const double base = g.number(p + "rope.freq_base_swa", 10000.0);
    std::vector<double> local(size_t(rope_dim / 2));
    for (size_t i = 0; i < local.size(); ++i)
      local[i] = 1.0 / std::pow(base, double(2 * i) / double(rope_dim));
    c["rope_freqs_local"] = local;
    c["layer_rope_local"] = sliding;
  }
}

}  // namespace krafla
