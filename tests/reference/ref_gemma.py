"""Reference (oracle) forward of Gemma 2 and Gemma 3 text models in numpy; ref_forward.py
dispatches here on model_type gemma2 / gemma3_text / gemma3. Written from transformers'
modeling_gemma2.py / modeling_gemma3.py / configuration_gemma{2,3}.py, independently of
tools/convert/families/gemma.py (the converter side); it reads config.json and the safetensors
directly.

  h = embed[tokens] * float32(sqrt(hidden_size))      (Gemma*ScaledWordEmbedding / normalizer)
  per layer:  x = gnorm(h, w_in)                      gnorm(x, w) = x / rms(x) * (1 + w),
                                                      rms(x) = sqrt(mean(x^2) + eps)
              q, k, v = x Wq^T, x Wk^T, x Wv^T        (per head, head_dim need not be dim/heads)
              Gemma 3: q, k = gnorm(q, w_qn), gnorm(k, w_kn) over head_dim
              q, k = rope(q), rope(k)                 Gemma 3: local layers rope_local_base_freq,
                                                      default rope; global layers rope_theta
                                                      and rope scaling
              s = q k^T * query_pre_attn_scalar^-0.5
              Gemma 2: s = cap * tanh(s / cap)        (attn_logit_softcapping, before the mask)
              a = softmax(s + mask) v;  mask: j <= i, and i - j < sliding_window on sliding layers
              h = h + gnorm(a Wo^T, w_post_attn)
              x = gnorm(h, w_pre_ffn)
              h = h + gnorm((gelu_tanh(x Wg^T) * (x Wu^T)) Wd^T, w_post_ffn)
  logits = gnorm(h, w_norm) W^T (W = embed when tied); Gemma2ForCausalLM / Gemma3ForCausalLM:
  logits = cap * tanh(logits / cap) with final_logit_softcapping. Gemma3ForConditionalGeneration
  applies no final cap and Gemma3Attention no attention cap (transformers passes no softcap there).
Sliding layers: layer_types, else Gemma 2 even layers, Gemma 3 (i + 1) % sliding_window_pattern
!= 0.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from ref_common import Options, attend, causal_mask, cos_sin, inv_frequencies
from ref_common import load_config, repeat_kv, rms_norm, rope

MODEL_TYPES = ("gemma2", "gemma3_text", "gemma3")
# Config class defaults (Gemma2Config, Gemma3TextConfig) for the keys read here.
# fmt: off
G2 = dict(head_dim=256, rms_norm_eps=1e-6, rope_theta=10000.0, query_pre_attn_scalar=256,
          sliding_window=4096, final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
          tie_word_embeddings=True, max_position_embeddings=8192, num_attention_heads=8,
          num_key_value_heads=4, vocab_size=256000)
G3 = dict(head_dim=256, rms_norm_eps=1e-6, rope_theta=1000000.0, rope_local_base_freq=10000.0,
          query_pre_attn_scalar=256, sliding_window=4096, final_logit_softcapping=None,
          attn_logit_softcapping=None, tie_word_embeddings=True, max_position_embeddings=131072,
          num_attention_heads=8, num_key_value_heads=4, vocab_size=262208, sliding_window_pattern=6)
# fmt: on


def text_cfg(cfg: dict[str, Any]) -> dict[str, Any]:
    mt = cfg["model_type"]
    t = dict(G2 if mt == "gemma2" else G3)
    t.update((cfg.get("text_config") or {}) if mt == "gemma3" else cfg)
    return t


def sliding_layers(t: dict[str, Any], gemma2: bool) -> list[bool]:
    n = t["num_hidden_layers"]
    if t.get("layer_types") is not None:
        return [x == "sliding_attention" for x in t["layer_types"]]
    if gemma2:
        return [i % 2 == 0 for i in range(n)]
    pattern = t.get("sliding_window_pattern") or 6
    return [(i + 1) % pattern != 0 for i in range(n)]


def rope_tables(t: dict[str, Any], gemma2: bool, hd: int) -> tuple[dict, dict]:
    """(global, local) rope parameter dicts, each with rope_type and rope_theta."""
    rp = t.get("rope_parameters") or {}
    per_type = bool(rp) and all(k in ("full_attention", "sliding_attention") for k in rp)
    if gemma2:
        g = dict(t.get("rope_scaling") or (rp.get("full_attention") if per_type else rp) or {})
        g["rope_theta"] = g.get("rope_theta") or t.get("rope_theta") or 10000.0
        return g, g
    g = dict((rp.get("full_attention") if per_type else rp) or {})
    g.update(t.get("rope_scaling") or {})
    g["rope_theta"] = g.get("rope_theta") or t.get("rope_theta") or 1000000.0
    loc = dict((rp.get("sliding_attention") if per_type else None) or {"rope_type": "default"})
    loc["rope_theta"] = loc.get("rope_theta") or t.get("rope_local_base_freq") or 10000.0
    return g, loc


def inv_freq(p: dict[str, Any], t: dict[str, Any], hd: int) -> tuple[np.ndarray, float]:
    """Inverse frequencies (one per pair) and the cos/sin factor of one rope dict."""
    fake = {
        "rope_scaling": p,
        "rope_theta": float(p["rope_theta"]),
        "max_position_embeddings": t["max_position_embeddings"],
        "model_type": "gemma",
    }
    return inv_frequencies(fake, hd)


def gnorm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """Gemma RMSNorm: (x / rms) * (1 + w), the (1 + w) formed in float32 as transformers does."""
    return rms_norm(x, (np.float32(1.0) + w.astype(np.float32)).astype(x.dtype), eps)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    c = x.dtype.type(math.sqrt(2.0 / math.pi))
    return x.dtype.type(0.5) * x * (1 + np.tanh(c * (x + x.dtype.type(0.044715) * x**3)))


def forward(d: str, tokens: list[int], opt: Options) -> np.ndarray:
    cfg = load_config(d)
    mt = cfg["model_type"]
    gemma2 = mt == "gemma2"
    t = text_cfg(cfg)
    dt = opt.dt
    W = opt.weights(d, "fit" if gemma2 else "round")
    base = next(
        b
        for b in ("language_model.model.", "model.language_model.", "model.")
        if W.has(b + "embed_tokens.weight")
    )
    head = "language_model.lm_head.weight" if base == "language_model.model." else "lm_head.weight"

    dim, nh = t["hidden_size"], t["num_attention_heads"]
    nkv = t.get("num_key_value_heads") or nh
    hd = t.get("head_dim") or dim // nh
    eps = t.get("rms_norm_eps") or 1e-6
    T = len(tokens)
    slide = sliding_layers(t, gemma2)
    g_rope, l_rope = rope_tables(t, gemma2, hd)
    tables = {}
    for key, p in (("global", g_rope), ("local", l_rope)):
        inv, factor = inv_freq(p, t, hd)
        tables[key] = cos_sin(np.outer(np.arange(T, dtype=np.float64), inv), dt, factor)
    scale = dt(t.get("query_pre_attn_scalar") or 256) ** dt(-0.5)
    attn_cap = t.get("attn_logit_softcapping") if gemma2 else None
    final_cap = t.get("final_logit_softcapping") if mt != "gemma3" else None

    emb = W(base + "embed_tokens.weight")
    h = emb[np.asarray(tokens)] * dt(np.float32(math.sqrt(dim)))
    for L in range(t["num_hidden_layers"]):
        p = f"{base}layers.{L}."
        x = gnorm(h, W(p + "input_layernorm.weight"), eps)

        def heads(name: str, n: int) -> np.ndarray:
            y = x @ W(p + f"self_attn.{name}.weight").T
            return y.reshape(T, n, hd).transpose(1, 0, 2)

        q, k, v = heads("q_proj", nh), heads("k_proj", nkv), heads("v_proj", nkv)
        if not gemma2:
            q = gnorm(q, W(p + "self_attn.q_norm.weight"), eps)
            k = gnorm(k, W(p + "self_attn.k_norm.weight"), eps)
        cos, sin = tables["local" if slide[L] and not gemma2 else "global"]
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        k, v = repeat_kv(k, v, nh)
        s = (q @ k.transpose(0, 2, 1)) * scale
        if attn_cap:
            s = dt(attn_cap) * np.tanh(s / dt(attn_cap))
        a = attend(s, causal_mask(T, t["sliding_window"] if slide[L] else 0), v)
        o = a.transpose(1, 0, 2).reshape(T, nh * hd) @ W(p + "self_attn.o_proj.weight").T
        h = h + gnorm(o, W(p + "post_attention_layernorm.weight"), eps)
        x = gnorm(h, W(p + "pre_feedforward_layernorm.weight"), eps)
        g = x @ W(p + "mlp.gate_proj.weight").T
        u = x @ W(p + "mlp.up_proj.weight").T
        m = (gelu_tanh(g) * u) @ W(p + "mlp.down_proj.weight").T
        h = h + gnorm(m, W(p + "post_feedforward_layernorm.weight"), eps)
    x = gnorm(h, W(base + "norm.weight"), eps)
    tied = t.get("tie_word_embeddings", True) and (
        mt != "gemma3" or cfg.get("tie_word_embeddings", True)
    )
    out = emb if tied or not W.has(head) else W(head)
    logits = x @ out.T
    if final_cap:
        logits = dt(final_cap) * np.tanh(logits / dt(final_cap))
    W.close()
    return logits.astype(np.float32)
