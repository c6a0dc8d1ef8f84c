"""The small pieces the reference (oracle) forwards share: ref_llama.py, ref_gemma.py,
ref_qwen35.py and ref_moe.py.
Config and weight loading (with the --quantized-weights round trip), RMSNorm,
rotate-half RoPE with its llama3 / yarn frequencies (modeling_rope_utils.py), the masked softmax
of attention, SiLU and the sigmoid.

Like the forwards, it is written from transformers' modeling code and imports nothing of the
converter's model code (tools/convert: cli.py, families/, hf_config.py, ...): the oracle stays
independent of the code it checks. Only the file reader (convert.safetensors_io) and the
quantization round trip (convert.quant, itself tested against llama.cpp's rules) are shared.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from convert import quant
from convert import safetensors_io as st

# The matrix class of a weight, by the module name before ".weight" (convert.py's --q8 classes).
MATRIX_CLASS = {
    "q_proj": "q",
    "k_proj": "k",
    "v_proj": "v",
    "o_proj": "o",
    "gate_proj": "gate",
    "up_proj": "up",
    "down_proj": "down",
    "embed_tokens": "embd",
    "lm_head": "output",
    "in_proj_qkv": "ssm_in",
    "in_proj_z": "ssm_in",
    "in_proj_a": "ssm_ab",
    "in_proj_b": "ssm_ab",
    "out_proj": "ssm_out",
}


def load_config(d: str) -> dict[str, Any]:
    with open(os.path.join(d, "config.json")) as f:
        return json.load(f)


class Weights:
    """Lazy weights by HF name, as dtype dt; with qtype, the matrices of a class first go
    through that type and back (the classes in q8 through q8_0 when qtype is q4_0)."""

    def __init__(
        self, d: str, dt: type, qtype: str | None, q8: set[str] | None, q4_rule: str
    ) -> None:
        self.ck, self.dt, self.qtype = st.Checkpoint(d), dt, qtype
        self.q8 = {"embd", "output"} if q8 is None else q8
        self.q4_rule = q4_rule

    def wtype(self, name: str) -> str | None:
        """The type the matrix `name` goes through (None: kept as stored)."""
        return self.class_type(MATRIX_CLASS.get(name.split(".")[-2]))

    def class_type(self, cls: str | None) -> str | None:
        """The type the matrices of class cls go through (None: kept as stored)."""
        if not (self.qtype and cls):
            return None
        return "q8_0" if self.qtype == "q4_0" and cls in self.q8 else self.qtype

    def matrix(self, w: np.ndarray, cls: str) -> np.ndarray:
        """A 2-D matrix of class cls read by other means (ref_moe.py's experts of a fused
        tensor), through its type and back, as dt."""
        t = self.class_type(cls)
        return (quant.round_trip(w, t, self.q4_rule) if t else w).astype(self.dt)

    def __call__(self, name: str) -> np.ndarray:
        w = self.ck.get(name)
        t = self.wtype(name)
        if t and w.ndim == 2:
            w = quant.round_trip(w, t, self.q4_rule)
        return w.astype(self.dt)

    def has(self, name: str) -> bool:
        return name in self.ck.where

    def close(self) -> None:
        self.ck.close()


@dataclass
class Options:
    """How a forward reads its weights and computes (ref_forward.py's options): dtype dt; qtype,
    q8 and q4_rule as Weights takes them (q4_rule None: the family's default); act_quant: the
    inputs of the quantized matmuls go through quant.act_round_trip (Qwen3.5 only)."""

    dt: type = np.float32
    qtype: str | None = None
    q8: set[str] | None = None
    q4_rule: str | None = None
    act_quant: bool = False

    def weights(self, d: str, default_rule: str) -> Weights:
        """The weights of checkpoint d; default_rule: the family's Q4_0 rule."""
        return Weights(d, self.dt, self.qtype, self.q8, self.q4_rule or default_rule)


# ---------------------------------------------------------------- norms, activations


def rms_norm(x: np.ndarray, w: np.ndarray, eps: float) -> np.ndarray:
    """x / sqrt(mean(x^2) + eps) * w over the last axis."""
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def silu(x: np.ndarray) -> np.ndarray:
    return x / (1 + np.exp(-x))


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


# ---------------------------------------------------------------- RoPE


def rope_dict(cfg: dict[str, Any]) -> tuple[dict[str, Any], float]:
    """The rope parameter dict and base, as RotaryEmbeddingConfigMixin standardizes them: the
    legacy rope_scaling wins over rope_parameters; the dict's rope_theta over the top-level one,
    which defaults to the family's default_theta (SmolLM3: 2e6)."""
    sc = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if sc and all(k in ("full_attention", "sliding_attention") for k in sc):
        sc = sc["full_attention"] if "full_attention" in sc else next(iter(sc.values()))
    base = cfg.get("rope_theta") or (2000000.0 if cfg.get("model_type") == "smollm3" else 10000.0)
    return sc, float(sc.get("rope_theta") or base)


def inv_frequencies(cfg: dict[str, Any], head_dim: int) -> tuple[np.ndarray, float]:
    """RoPE inverse frequencies and attention factor, computed from config.json (oracle copy,
    one frequency at a time, from the modeling_rope_utils formulas)."""
    sc, base = rope_dict(cfg)
    kind = sc.get("rope_type", sc.get("type", "default")) if sc else "default"
    half = head_dim // 2
    plain = [1.0 / (base ** (2 * i / head_dim)) for i in range(half)]
    if kind == "default":
        return np.array(plain), 1.0
    if kind == "linear":
        return np.array([f / sc["factor"] for f in plain]), 1.0
    if kind == "llama3":
        return np.array([_llama3_one(f, sc) for f in plain]), 1.0
    if kind == "yarn":
        orig = cfg.get("original_max_position_embeddings") or sc.get(
            "original_max_position_embeddings"
        )
        return _yarn(plain, base, head_dim, sc, cfg["max_position_embeddings"], orig)
    raise ValueError(f"rope type '{kind}' is not supported")


def _llama3_one(f: float, sc: dict[str, Any]) -> float:
    old = sc["original_max_position_embeddings"]
    low_wl, high_wl = old / sc["low_freq_factor"], old / sc["high_freq_factor"]
    wl = 2 * math.pi / f
    if wl < high_wl:
        return f  # high frequency: untouched
    if wl > low_wl:
        return f / sc["factor"]  # low frequency: fully interpolated
    t = (old / wl - sc["low_freq_factor"]) / (sc["high_freq_factor"] - sc["low_freq_factor"])
    return (1 - t) * f / sc["factor"] + t * f


def _yarn(
    plain: list[float],
    base: float,
    head_dim: int,
    sc: dict[str, Any],
    max_pos: int,
    orig: int | None,
) -> tuple[np.ndarray, float]:
    orig = orig or max_pos
    factor = sc.get("factor")
    if factor is None:
        factor = max_pos / orig

    def get_mscale(s: float, m: float = 1.0) -> float:
        return 1.0 if s <= 1 else 0.1 * m * math.log(s) + 1.0

    attn = sc.get("attention_factor")
    if attn is None:
        if sc.get("mscale") and sc.get("mscale_all_dim"):
            attn = get_mscale(factor, sc["mscale"]) / get_mscale(factor, sc["mscale_all_dim"])
        else:
            attn = get_mscale(factor)

    def dim_for(rotations: float) -> float:
        return head_dim * math.log(orig / (rotations * 2 * math.pi)) / (2 * math.log(base))

    lo, hi = dim_for(sc.get("beta_fast") or 32), dim_for(sc.get("beta_slow") or 1)
    if sc.get("truncate", True):
        lo, hi = math.floor(lo), math.ceil(hi)
    lo, hi = max(lo, 0), min(hi, head_dim - 1)
    if lo == hi:
        hi += 0.001
    out = []
    for i, f in enumerate(plain):
        ramp = min(max((i - lo) / (hi - lo), 0.0), 1.0)
        out.append(f / factor * ramp + f * (1 - ramp))
    return np.array(out), float(attn)


def cos_sin(ang: np.ndarray, dt: type, factor: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin tables [T, 2 * pairs] (rotate_half layout) of the angles pos * inv_freq
    [T, pairs], times the attention factor."""
    full = np.concatenate([ang, ang], -1)
    return (np.cos(full) * factor).astype(dt), (np.sin(full) * factor).astype(dt)


def rope(x: np.ndarray, cos: np.ndarray, sin: np.ndarray, rot: int | None = None) -> np.ndarray:
    """x: [heads, T, head_dim]; rotate_half pairs element i with i + rot/2 within the first rot
    dims (all of them by default); the rest pass through (partial rotary)."""
    if rot is not None and rot < x.shape[-1]:
        return np.concatenate([rope(x[..., :rot], cos, sin), x[..., rot:]], axis=-1)
    half = x.shape[-1] // 2
    rotated = np.concatenate([-x[..., half:], x[..., :half]], axis=-1)
    return x * cos + rotated * sin


# ---------------------------------------------------------------- attention


def causal_mask(T: int, window: int = 0) -> np.ndarray:
    """True where query i may attend to key j: j <= i, and i - j < window when one is set
    (transformers' sliding_window_overlay keeps kv_idx > q_idx - window)."""
    i, j = np.arange(T)[:, None], np.arange(T)[None, :]
    ok = j <= i
    if window:
        ok &= (i - j) < window
    return ok


def repeat_kv(k: np.ndarray, v: np.ndarray, n_heads: int) -> tuple[np.ndarray, np.ndarray]:
    """GQA: key/value heads [kv_heads, T, hd] repeated so that query head h reads h // group."""
    group = n_heads // k.shape[0]
    return np.repeat(k, group, axis=0), np.repeat(v, group, axis=0)


def attend(s: np.ndarray, mask: np.ndarray, v: np.ndarray) -> np.ndarray:
    """softmax(s masked) v: scores s [heads, T, T], values v [heads, T, hd]."""
    s = np.where(mask, s, -np.inf)
    s = np.exp(s - s.max(-1, keepdims=True))
    return (s / s.sum(-1, keepdims=True)) @ v
