"""Reference (oracle) forward of Llama/Mistral/Qwen2/Qwen3/SmolLM2/SmolLM3 causal LMs in numpy;
ref_forward.py dispatches here on every model_type that is not Gemma's or Qwen3.5's.

Written from the transformers modeling equations (modeling_llama.py, modeling_mistral.py,
modeling_qwen2.py, modeling_qwen3.py, modeling_smollm3.py, modeling_rope_utils.py), reading the
HF directory directly (config.json + safetensors), never the .mlb and never the converter's
code: it is what the C++ runtime is compared against.

  h = embed[tokens]
  per layer:  x = rmsnorm(h) * w_attn;  q,k,v = x Wq^T + bq, x Wk^T + bk, x Wv^T + bv (per head;
                  biases where the checkpoint has them: Qwen2)
              q,k = rmsnorm_head(q) * w_qn, rmsnorm_head(k) * w_kn   (Qwen3, over head_dim)
              q,k = q*cos + rotate_half(q)*sin  (cos/sin of pos*inv_freq, times attention factor;
                  skipped on SmolLM3's NoPE layers)
              a = softmax(q k^T / sqrt(head_dim) + causal/sliding mask) v
                  (GQA: kv head = h // group)
              h += a Wo^T;  x = rmsnorm(h) * w_ffn;  h += (silu(x Wg^T) * (x Wu^T)) Wd^T
  logits = (rmsnorm(h) * w_norm) W_out^T  (W_out = embed when tied)
rmsnorm(x) = x / sqrt(mean(x^2) + eps). A sliding window masks key j for query i when
i - j >= window (transformers' sliding_window_overlay keeps kv_idx > q_idx - window): Mistral on
every layer; Qwen2/Qwen3/SmolLM3 on the layers whose layer type is sliding_attention.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from convert import quant
from ref_common import Options, Weights, attend, causal_mask, cos_sin, inv_frequencies
from ref_common import load_config, repeat_kv, rms_norm, rope, silu


def layer_schedule(cfg: dict[str, Any]) -> tuple[list[int], list[bool]]:
    """Per layer: the sliding window (0 = none) and whether RoPE is applied, from the
    configuration classes' rules (Qwen2Config/Qwen3Config/SmolLM3Config.__post_init__ and the
    attention modules)."""
    mt, n = cfg["model_type"], cfg["num_hidden_layers"]
    if mt == "mistral":
        return [cfg.get("sliding_window") or 0] * n, [True] * n
    if mt not in ("qwen2", "qwen3", "smollm3"):
        return [0] * n, [True] * n
    use_rope = [True] * n
    if mt == "smollm3":
        flags = cfg.get("no_rope_layers")
        if flags is None:  # a 1 means "uses RoPE"; every interval-th layer is NoPE
            every = cfg.get("no_rope_layer_interval") or 4
            flags = [int((i + 1) % every != 0) for i in range(n)]
        use_rope = [flags[i] == 1 for i in range(n)]
    window = cfg.get("sliding_window") if cfg.get("use_sliding_window") else None
    kinds = cfg.get("layer_types")
    if kinds is None:
        if mt == "smollm3":
            kinds = [
                "sliding_attention" if window is not None and not use_rope[i] else "full_attention"
                for i in range(n)
            ]
        else:
            first = cfg.get("max_window_layers", 28)
            kinds = [
                "sliding_attention" if window is not None and i >= first else "full_attention"
                for i in range(n)
            ]
    windows = []
    for i in range(n):
        if kinds[i] == "sliding_attention" and not window:
            raise ValueError(
                f"layer {i} is sliding_attention without use_sliding_window/sliding_window"
            )
        windows.append(window if kinds[i] == "sliding_attention" else 0)
    return windows, use_rope


# x W^T for the weight `name` (or its already loaded matrix w), as the forward runs it.
Matmul = Callable[..., np.ndarray]
# A layer's MLP: (weights, matmul, HF layer prefix, layer index, normed input [T, dim]) -> output
Ffn = Callable[[Weights, Matmul, str, int, np.ndarray], np.ndarray]


def swiglu(W: Weights, mm: Matmul, p: str, layer: int, x: np.ndarray) -> np.ndarray:
    """The dense MLP: down(silu(gate(x)) * up(x))."""
    g = mm(x, p + "mlp.gate_proj.weight")
    u = mm(x, p + "mlp.up_proj.weight")
    return mm(silu(g) * u, p + "mlp.down_proj.weight")


def forward(d: str, tokens: list[int], opt: Options, ffn: Ffn = swiglu) -> np.ndarray:
    """ffn: the MLP of each layer (ref_moe.py passes Qwen3-MoE's sparse blocks).
    opt.act_quant (with qtype q8_0/q4_0): the inputs of the quantized matmuls go through
    quant.act_round_trip, as the runtime's 8-bit dot products see them."""
    cfg = load_config(d)
    dt = opt.dt
    W = opt.weights(d, "fit")
    dim, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads") or nh
    hd = cfg.get("head_dim") or (128 if cfg["model_type"] == "qwen3" else dim // nh)
    eps = cfg.get("rms_norm_eps", 1e-6)
    T = len(tokens)
    inv, attn_factor = inv_frequencies(cfg, hd)
    cos, sin = cos_sin(np.outer(np.arange(T, dtype=np.float64), inv), dt, attn_factor)
    windows, use_rope = layer_schedule(cfg)

    def mm(x: np.ndarray, name: str, w: np.ndarray | None = None) -> np.ndarray:
        w = W(name) if w is None else w
        if opt.act_quant and W.wtype(name) in ("q8_0", "q4_0"):
            x = quant.act_round_trip(x).astype(dt)
        return x @ w.T

    def proj(x: np.ndarray, name: str, heads: int) -> np.ndarray:
        y = mm(x, name + ".weight")
        if W.has(name + ".bias"):
            y = y + W(name + ".bias")
        return y.reshape(T, heads, hd).transpose(1, 0, 2)

    emb = W("model.embed_tokens.weight")
    h = emb[np.asarray(tokens)].astype(dt)
    for layer in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        x = rms_norm(h, W(p + "input_layernorm.weight"), eps)
        q = proj(x, p + "self_attn.q_proj", nh)
        k = proj(x, p + "self_attn.k_proj", nkv)
        v = proj(x, p + "self_attn.v_proj", nkv)
        if cfg["model_type"] in ("qwen3", "qwen3_moe"):  # Qwen3-MoE's attention is Qwen3's
            q = rms_norm(q, W(p + "self_attn.q_norm.weight"), eps)
            k = rms_norm(k, W(p + "self_attn.k_norm.weight"), eps)
        if use_rope[layer]:
            q, k = rope(q, cos, sin), rope(k, cos, sin)
        k, v = repeat_kv(k, v, nh)
        s = q @ k.transpose(0, 2, 1) / np.sqrt(dt(hd))
        a = attend(s, causal_mask(T, windows[layer]), v)
        h = h + mm(a.transpose(1, 0, 2).reshape(T, nh * hd), p + "self_attn.o_proj.weight")
        x = rms_norm(h, W(p + "post_attention_layernorm.weight"), eps)
        h = h + ffn(W, mm, p, layer, x)
    x = rms_norm(h, W("model.norm.weight"), eps)
    tied = cfg.get("tie_word_embeddings", cfg["model_type"] == "smollm3")
    if tied or not W.has("lm_head.weight"):
        logits = mm(x, "model.embed_tokens.weight", emb).astype(np.float32)
    else:
        logits = mm(x, "lm_head.weight").astype(np.float32)
    W.close()
    return logits
