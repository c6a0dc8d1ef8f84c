"""Reference (oracle) forward of Qwen3.5 / Qwen3.6 dense language models in numpy
(ref_forward.py dispatches here for model_type qwen3_5 / qwen3_5_text).

Written from transformers' modeling_qwen3_5.py equations, reading config.json and the
safetensors directly (never the .mlb, never the converter's families/qwen35.py). The DeltaNet
layers use the RECURRENT definition (torch_recurrent_gated_delta_rule), one token at a time:

  per layer: x = rmsnorm(h) * (1 + w_in)
  linear_attention (Gated DeltaNet):
      qkv = conv_silu(x Wqkv^T)  — causal depthwise conv over time, kernel K, zero history
      q, k, v = split(qkv) per head; q, k = l2norm(q), l2norm(k) (x * rsqrt(sum x^2 + 1e-6));
      key head j serves value heads j*r .. j*r + r - 1 (r = n_v / n_k); q *= dk^-0.5
      beta = sigmoid(x Wb^T);  g = -exp(A_log) * softplus(x Wa^T + dt_bias)
      S_t = S_{t-1} * exp(g_t);  d = (v_t - S_t^T k_t) * beta_t;  S_t += k_t d^T;  o_t = S_t^T q_t
      o = rmsnorm_head(o) * w_norm * silu(z),  z = x Wz^T;   out = o Wout^T
  full_attention:
      [q | gate] per head = x Wq^T (q_proj rows: per head, head_dim query then head_dim gate)
      q, k = rmsnorm_head(q) * (1 + w_qn), rmsnorm_head(k) * (1 + w_kn)
      RoPE (rotate_half) on the first rot = head_dim * partial_rotary_factor dims, theta from
      rope_parameters (text positions: all mrope sections see the same position)
      a = softmax(q k^T / sqrt(head_dim) + causal mask) v  (GQA);  out = (a * sigmoid(gate)) Wo^T
  h += out;  h += mlp(rmsnorm(h) * (1 + w_post))  (SwiGLU)
  logits = rmsnorm(h) * (1 + w_norm) W_out^T  (W_out = embedding when tied)
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from convert import quant
from ref_common import Weights, attend, causal_mask, cos_sin, load_config, repeat_kv
from ref_common import Options, rms_norm, rope, sigmoid, silu

MODEL_TYPES = ("qwen3_5", "qwen3_5_text")  # the image-text wrapper and its text model
WRAPPERS = ("qwen3_5", "qwen3_5_moe")  # the image-text types (ref_moe.py: Qwen3.5-MoE)
Matmul = Callable[..., np.ndarray]
# A layer's MLP: (weights, matmul, HF layer prefix, layer index, normed input) -> output
Ffn = Callable[[Weights, Matmul, str, int, np.ndarray], np.ndarray]


def text_of(cfg: dict[str, Any]) -> dict[str, Any]:
    """The language model's config (text_config of the image-text wrappers)."""
    wrapped = cfg.get("model_type") in WRAPPERS
    t = dict(cfg.get("text_config") or {}) if wrapped else dict(cfg)
    if wrapped and "tie_word_embeddings" in cfg:
        t["tie_word_embeddings"] = cfg["tie_word_embeddings"]
    return t


def swiglu(W: Weights, mm: Matmul, p: str, layer: int, x: np.ndarray) -> np.ndarray:
    """The dense MLP: down(silu(gate(x)) * up(x))."""
    g = mm(x, p + "mlp.gate_proj.weight")
    u = mm(x, p + "mlp.up_proj.weight")
    return mm(silu(g) * u, p + "mlp.down_proj.weight")


def forward(d: str, tokens: list[int], opt: Options, ffn: Ffn = swiglu) -> np.ndarray:
    """opt.act_quant (with qtype q8_0/q4_0): the inputs of the quantized matmuls go through
    quant.act_round_trip, as the runtime's 8-bit dot products see them. ffn: each layer's MLP
    (ref_moe.py passes Qwen3.5-MoE's sparse blocks)."""
    cfg = text_of(load_config(d))
    dt = opt.dt
    W = opt.weights(d, "fit")
    base = (
        "model.language_model." if W.has("model.language_model.embed_tokens.weight") else "model."
    )

    def mm(x: np.ndarray, name: str, w: np.ndarray | None = None) -> np.ndarray:
        """x W^T for the weight `name` (or its already loaded matrix w)."""
        w = W(name) if w is None else w
        if opt.act_quant and W.wtype(name) in ("q8_0", "q4_0"):
            x = quant.act_round_trip(x).astype(dt)
        return x @ w.T

    n = cfg["num_hidden_layers"]
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg.get("head_dim", 256)
    eps = cfg.get("rms_norm_eps", 1e-6)
    every = cfg.get("full_attention_interval", 4)
    types = cfg.get("layer_types") or [
        "full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)
    ]
    rp = cfg.get("rope_parameters") or {}
    theta = rp.get("rope_theta", cfg.get("rope_theta", 10000.0))
    rot = int(hd * rp.get("partial_rotary_factor", cfg.get("partial_rotary_factor", 0.25)))
    T = len(tokens)
    inv = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.int64).astype(np.float32) / rot)
    inv = inv.astype(np.float32)
    ang = np.outer(np.arange(T, dtype=np.float32), inv).astype(
        np.float32
    )  # float32 as transformers
    cos, sin = cos_sin(ang, dt)

    def norm1(x: np.ndarray, w: np.ndarray) -> np.ndarray:  # zero-centered: (1 + w)
        return rms_norm(x, 1 + w, eps)

    emb = W(base + "embed_tokens.weight")
    h = emb[np.asarray(tokens)].astype(dt)
    for i in range(n):
        p = f"{base}layers.{i}."
        x = norm1(h, W(p + "input_layernorm.weight"))
        if types[i] == "linear_attention":
            out = _delta_layer(cfg, W, mm, p + "linear_attn.", x, eps, dt)
        else:
            a = p + "self_attn."
            qg = mm(x, a + "q_proj.weight").reshape(T, nh, 2 * hd)
            q, gate = qg[..., :hd], qg[..., hd:].reshape(T, nh * hd)
            k = mm(x, a + "k_proj.weight").reshape(T, nkv, hd)
            v = mm(x, a + "v_proj.weight").reshape(T, nkv, hd)
            q = norm1(q, W(a + "q_norm.weight")).transpose(1, 0, 2)
            k = norm1(k, W(a + "k_norm.weight")).transpose(1, 0, 2)
            v = v.transpose(1, 0, 2)
            q, k = rope(q, cos, sin, rot), rope(k, cos, sin, rot)
            k, v = repeat_kv(k, v, nh)
            s = q @ k.transpose(0, 2, 1) / np.sqrt(dt(hd))
            att = attend(s, causal_mask(T), v).transpose(1, 0, 2).reshape(T, nh * hd)
            out = mm(att * sigmoid(gate), a + "o_proj.weight")
        h = h + out
        x = norm1(h, W(p + "post_attention_layernorm.weight"))
        h = h + ffn(W, mm, p, i, x)
    x = norm1(h, W(base + "norm.weight"))
    tied = cfg.get("tie_word_embeddings", False) or not W.has("lm_head.weight")
    if tied:
        logits = mm(x, base + "embed_tokens.weight", emb)
    else:
        logits = mm(x, "lm_head.weight")
    logits = logits.astype(np.float32)
    W.close()
    return logits


def gated_delta_recurrent(
    q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray, beta: np.ndarray
) -> np.ndarray:
    """q, k [T, H, dk] (normalized, q scaled), v [T, H, dv], g, beta [T, H] -> o [T, H, dv], from a
    zero state, one token at a time (torch_recurrent_gated_delta_rule)."""
    T, H, dk = k.shape
    S = np.zeros((H, dk, v.shape[-1]), dtype=v.dtype)
    o = np.zeros_like(v)
    for t in range(T):
        S = S * np.exp(g[t])[:, None, None]
        mem = np.einsum("hkv,hk->hv", S, k[t])
        delta = (v[t] - mem) * beta[t][:, None]
        S = S + k[t][:, :, None] * delta[:, None, :]
        o[t] = np.einsum("hkv,hk->hv", S, q[t])
    return o


def _delta_layer(
    cfg: dict[str, Any], W: Weights, mm: Matmul, a: str, x: np.ndarray, eps: float, dt: type
) -> np.ndarray:
    T = x.shape[0]
    nk, nv = cfg["linear_num_key_heads"], cfg["linear_num_value_heads"]
    dk, dv = cfg["linear_key_head_dim"], cfg["linear_value_head_dim"]
    K = cfg["linear_conv_kernel_dim"]
    mixed = mm(x, a + "in_proj_qkv.weight")  # [T, C]
    z = mm(x, a + "in_proj_z.weight").reshape(T, nv, dv)
    b = mm(x, a + "in_proj_b.weight")  # [T, nv]
    alpha = mm(x, a + "in_proj_a.weight")
    w = W(a + "conv1d.weight").reshape(mixed.shape[1], K)  # [C, 1, K] -> [C, K]
    padded = np.concatenate([np.zeros((K - 1, mixed.shape[1]), dtype=dt), mixed], axis=0)
    conv = sum(padded[j : j + T] * w[:, j] for j in range(K))  # out[t] = sum_j w[j] x[t-K+1+j]
    conv = silu(conv)
    q = conv[:, : nk * dk].reshape(T, nk, dk)
    k = conv[:, nk * dk : 2 * nk * dk].reshape(T, nk, dk)
    v = conv[:, 2 * nk * dk :].reshape(T, nv, dv)
    q = q / np.sqrt((q * q).sum(-1, keepdims=True) + 1e-6)
    k = k / np.sqrt((k * k).sum(-1, keepdims=True) + 1e-6)
    # value head j*r+i uses key head j
    q, k = np.repeat(q, nv // nk, axis=1), np.repeat(k, nv // nk, axis=1)
    q = q / np.sqrt(dt(dk))
    beta = sigmoid(b)
    A = np.exp(W(a + "A_log").astype(np.float32)).astype(dt)
    sp = alpha + W(a + "dt_bias")
    g = -A * np.where(sp > 20, sp, np.log1p(np.exp(np.minimum(sp, 20))))  # softplus (threshold 20)
    o = gated_delta_recurrent(q, k, v, g, beta)
    o = rms_norm(o, W(a + "norm.weight"), eps) * silu(z)
    return mm(o.reshape(T, nv * dv), a + "out_proj.weight")
