"""Reference (oracle) forward of Gemma 4 text models in numpy; ref_forward.py dispatches here
on model_type gemma4 / gemma4_text. Written from transformers' modeling_gemma4.py
(Gemma4TextModel, Gemma4TextDecoderLayer, Gemma4TextAttention, Gemma4TextMLP, Gemma4TextRouter,
Gemma4TextExperts), configuration_gemma4.py and modeling_rope_utils.py
(_compute_proportional_rope_parameters), independently of the converter; it reads config.json
and the safetensors directly.

  norm(x, w) = x / sqrt(mean(x^2) + eps) * w       (the weight itself, not Gemma 2/3's 1 + w;
                                                    v_norm and the router's norm have no weight)
  h = embed[tokens] * sqrt(hidden_size)            (float32 sqrt: the weights are read as f32)
  Per-layer embeddings (hidden_size_per_layer_input P > 0), once per token:
    tok = embed_per_layer[tokens] * sqrt(P)                          [T, L, P]
    ctx = norm((h @ W_plmp^T) * hidden_size^-0.5, w_plpn)            [T, L, P] (norm over P)
    ple = (ctx + tok) * 2^-0.5
  per layer l (sliding or full, layer_types; the last one always full):
    hd = global_head_dim on full layers, else head_dim; kv heads = num_global_key_value_heads on
    full layers of attention_k_eq_v models, else num_key_value_heads
    x = norm(h, w_in)
    q = rope(norm(heads(x Wq^T), w_qn))
    a layer that owns its K/V: k_raw = heads(x Wk^T); v_raw = heads(x Wv^T), or k_raw where the
      layer has no v_proj (attention_k_eq_v full layers); k = rope(norm(k_raw, w_kn));
      v = norm(v_raw) (no weight)
    a KV-shared layer (l >= L - num_kv_shared_layers): the K/V of the last non-shared layer of
      its type; its own q_proj, q_norm, o_proj and mask
    s = q k^T (scale 1.0, no soft-cap); mask: causal, and i - j < sliding_window on sliding layers
    h = h + norm(softmax(s) v Wo^T, w_post_attn)
    r = h
    m = (gelu_tanh(x2 Wg^T) * (x2 Wu^T)) Wd^T with x2 = norm(r, w_pre_ffn) (the MLP twice as
        wide on KV-shared layers of use_double_wide_mlp models)
    enable_moe_block: m = norm(m, w_post_ffn_1) + norm(moe, w_post_ffn_2), where
        z = norm(r) * router.scale * hidden_size^-0.5; p = softmax(z Wr^T); top-k of p
        (torch.topk: lower index first on ties); weights renormalised to sum 1, times
        router.per_expert_scale[e]; moe = sum_k w_k * expert_e(norm(r, w_pre_ffn_2)), each
        expert gelu_tanh(G_e x) * (U_e x) then D_e, G_e / U_e the first / second half of the
        rows of experts.gate_up_proj[e]
    h = r + norm(m, w_post_ffn)
    P > 0: h = h + norm((gelu_tanh(h Wgate^T) * ple[:, l]) Wproj^T, w_post_ple)
    h = h * layer_scalar
  logits = cap * tanh((norm(h, w_norm) embed^T) / cap), cap = final_logit_softcapping.
RoPE (rotate_half): sliding layers "default" over head_dim with their theta; full layers
"proportional": inv_freq[j] = theta^(-2j / global_head_dim) for j < partial_rotary_factor *
global_head_dim / 2, else 0 (those pairs pass through), divided by the dict's factor.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ref_common import Options, attend, causal_mask, cos_sin, load_config, repeat_kv, rms_norm

MODEL_TYPES = ("gemma4", "gemma4_text")
# Gemma4TextConfig's defaults for the keys read here.
# fmt: off
DEFAULTS = dict(vocab_size=262144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30,
                num_attention_heads=8, num_key_value_heads=4, head_dim=256, global_head_dim=512,
                num_global_key_value_heads=None, rms_norm_eps=1e-6, sliding_window=512,
                final_logit_softcapping=None, hidden_size_per_layer_input=256,
                attention_k_eq_v=False, num_kv_shared_layers=0, enable_moe_block=False,
                use_double_wide_mlp=False, num_experts=None, top_k_experts=None,
                moe_intermediate_size=None, tie_word_embeddings=True)
ROPE_DEFAULT = {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                                   "rope_theta": 1000000.0}}
# fmt: on


def text_cfg(cfg: dict[str, Any]) -> dict[str, Any]:
    t = dict(DEFAULTS)
    t.update((cfg.get("text_config") or {}) if cfg["model_type"] == "gemma4" else cfg)
    if t.get("moe_intermediate_size") is None:  # the older name
        t["moe_intermediate_size"] = t.get("expert_intermediate_size")
    return t


def layer_types(t: dict[str, Any]) -> list[str]:
    """Gemma4TextConfig.__post_init__: every sixth layer full by default; the last always."""
    n = t["num_hidden_layers"]
    lt = list(t.get("layer_types") or [])
    if not lt:
        lt = ["sliding_attention" if (i + 1) % 6 else "full_attention" for i in range(n)]
    lt[-1] = "full_attention"
    return lt


def geometry(t: dict[str, Any], types: list[str], i: int) -> tuple[int, int]:
    """(head_dim, kv heads) of layer i: per_layer_config (newer configs) where it names them."""
    full = types[i] == "full_attention"
    plc = (t.get("per_layer_config") or {}).get(str(i)) or {}
    hd = plc.get("head_dim") or (t["global_head_dim"] if full and t["global_head_dim"] else None)
    nkv = plc.get("num_key_value_heads")
    if nkv is None:
        alt = t["attention_k_eq_v"] and full
        nkv = t["num_global_key_value_heads"] if alt else t["num_key_value_heads"]
    return int(hd or t["head_dim"]), int(nkv)


def inv_freq(p: dict[str, Any], hd: int) -> np.ndarray:
    """One inverse frequency per rotate_half pair of a head of hd."""
    kind = p.get("rope_type", "default")
    base, factor = float(p["rope_theta"]), float(p.get("factor", 1.0))
    if kind == "default":
        return np.array([1.0 / base ** (2 * j / hd) for j in range(hd // 2)])
    if kind == "proportional":
        angles = int(p.get("partial_rotary_factor", 1.0) * hd // 2)
        rot = [1.0 / base ** (2 * j / hd) for j in range(angles)]
        return np.array(rot + [0.0] * (hd // 2 - angles)) / factor
    raise ValueError(f"rope type '{kind}' is not supported")


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = x.dtype.type(math.sqrt(2.0 / math.pi))
    return x.dtype.type(0.5) * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x**3)))


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def moe(W, p: str, t: dict[str, Any], r: np.ndarray, eps: float, dt: type) -> np.ndarray:
    """Gemma4TextRouter + Gemma4TextExperts on the post-attention stream r [T, dim]."""
    dim, k, inter = t["hidden_size"], t["top_k_experts"], t["moe_intermediate_size"]
    ones = np.ones(dim, dt)
    z = rms_norm(r, ones, eps) * W(p + "router.scale") * dt(dim**-0.5)
    probs = softmax((z @ W(p + "router.proj.weight").T).astype(np.float32))
    per_expert = W(p + "router.per_expert_scale")
    x = rms_norm(r, W(p + "pre_feedforward_layernorm_2.weight"), eps)
    gate_up = W.ck.get(p + "experts.gate_up_proj")
    down = W.ck.get(p + "experts.down_proj")
    out = np.zeros_like(r)
    for i in range(r.shape[0]):
        top = np.argsort(-probs[i], kind="stable")[:k]  # lower index first among equals
        w = probs[i, top] / probs[i, top].sum()
        for e, we in sorted(zip(top, w)):  # summed in ascending expert order, as index_add_
            g = W.matrix(gate_up[e, :inter], "gate")
            u = W.matrix(gate_up[e, inter:], "up")
            y = (gelu_tanh(x[i] @ g.T) * (x[i] @ u.T)) @ W.matrix(down[e], "down").T
            out[i] += dt(we) * per_expert[e] * y
    return out


def forward(d: str, tokens: list[int], opt: Options) -> np.ndarray:
    cfg = load_config(d)
    t = text_cfg(cfg)
    dt = opt.dt
    W = opt.weights(d, "round")
    base = next(b for b in ("model.language_model.", "model.") if W.has(b + "embed_tokens.weight"))
    dim, nh, n_layers = t["hidden_size"], t["num_attention_heads"], t["num_hidden_layers"]
    eps = t["rms_norm_eps"]
    T = len(tokens)
    types = layer_types(t)
    rp = t.get("rope_parameters") or ROPE_DEFAULT
    first_shared = n_layers - (t["num_kv_shared_layers"] or 0)
    # the layer whose K/V a shared layer of each type reads: the last non-shared one of the type
    source = {lt: max(i for i in range(first_shared) if types[i] == lt) for lt in set(types)}
    pos = np.arange(T, dtype=np.float64)
    tables = {}
    for lt in set(types):
        hd = t["global_head_dim"] if lt == "full_attention" and t["global_head_dim"] else None
        tables[lt] = cos_sin(np.outer(pos, inv_freq(rp[lt], hd or t["head_dim"])), dt)

    emb = W(base + "embed_tokens.weight")
    ids = np.asarray(tokens)
    h = emb[ids] * dt(math.sqrt(dim))
    P = t["hidden_size_per_layer_input"] or 0
    if P:
        tok = W(base + "embed_tokens_per_layer.weight")[ids] * dt(math.sqrt(P))
        ctx = (h @ W(base + "per_layer_model_projection.weight").T) * dt(dim**-0.5)
        ctx = rms_norm(
            ctx.reshape(T, n_layers, P), W(base + "per_layer_projection_norm.weight"), eps
        )
        ple = (ctx + tok.reshape(T, n_layers, P)) * dt(2.0**-0.5)
    kv: dict[int, tuple[np.ndarray, np.ndarray]] = {}
    for L in range(n_layers):
        p = f"{base}layers.{L}."
        hd, nkv = geometry(t, types, L)
        x = rms_norm(h, W(p + "input_layernorm.weight"), eps)
        cos, sin = tables[types[L]]

        def heads(name: str, n: int) -> np.ndarray:
            y = x @ W(p + f"self_attn.{name}.weight").T
            return y.reshape(T, n, hd).transpose(1, 0, 2)

        def rope(y: np.ndarray) -> np.ndarray:
            half = y.shape[-1] // 2
            return y * cos + np.concatenate([-y[..., half:], y[..., :half]], axis=-1) * sin

        q = rope(rms_norm(heads("q_proj", nh), W(p + "self_attn.q_norm.weight"), eps))
        if L >= first_shared:
            k, v = kv[source[types[L]]]
        else:
            k_raw = heads("k_proj", nkv)
            v_raw = heads("v_proj", nkv) if W.has(p + "self_attn.v_proj.weight") else k_raw
            k = rope(rms_norm(k_raw, W(p + "self_attn.k_norm.weight"), eps))
            v = rms_norm(v_raw, np.ones(hd, dt), eps)
            kv[L] = k, v
        kr, vr = repeat_kv(k, v, nh)
        s = q @ kr.transpose(0, 2, 1)
        window = t["sliding_window"] if types[L] == "sliding_attention" else 0
        a = attend(s, causal_mask(T, window), vr)
        o = a.transpose(1, 0, 2).reshape(T, nh * hd) @ W(p + "self_attn.o_proj.weight").T
        h = h + rms_norm(o, W(p + "post_attention_layernorm.weight"), eps)
        r = h
        x2 = rms_norm(r, W(p + "pre_feedforward_layernorm.weight"), eps)
        g = x2 @ W(p + "mlp.gate_proj.weight").T
        u = x2 @ W(p + "mlp.up_proj.weight").T
        m = (gelu_tanh(g) * u) @ W(p + "mlp.down_proj.weight").T
        if t["enable_moe_block"]:
            m1 = rms_norm(m, W(p + "post_feedforward_layernorm_1.weight"), eps)
            m2 = rms_norm(
                moe(W, p, t, r, eps, dt), W(p + "post_feedforward_layernorm_2.weight"), eps
            )
            m = m1 + m2
        h = r + rms_norm(m, W(p + "post_feedforward_layernorm.weight"), eps)
        if P:
            gp = gelu_tanh(h @ W(p + "per_layer_input_gate.weight").T) * ple[:, L]
            y = gp @ W(p + "per_layer_projection.weight").T
            h = h + rms_norm(y, W(p + "post_per_layer_input_norm.weight"), eps)
        h = h * W(p + "layer_scalar")
    x = rms_norm(h, W(base + "norm.weight"), eps)
    tied = cfg.get("tie_word_embeddings", t["tie_word_embeddings"])
    head = "lm_head.weight"
    logits = x @ (emb if tied or not W.has(head) else W(head)).T
    cap = t.get("final_logit_softcapping")
    if cap:
        logits = dt(cap) * np.tanh(logits / dt(cap))
    W.close()
    return logits.astype(np.float32)
