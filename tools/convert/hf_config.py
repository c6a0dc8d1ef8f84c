"""Hugging Face config.json helpers that the converter's families share (families/: base.py,
llama.py, gemma.py, qwen35.py): ConvertError, RoPE inverse frequencies with the checkpoint's
rope scaling (modeling_rope_utils.py, transformers v5: inverse frequencies over head_dim), the
text part of an image-text config, required keys, token id lists and the attention shape.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

DEFAULT_THETA = {"smollm3": 2000000.0}  # SmolLM3Config.default_theta; others 10000
ROPE_TYPES = ("default", "linear", "llama3", "yarn")


class ConvertError(Exception):
    """A refusal: the message names the field or tensor."""


# ---------------------------------------------------------------- rope (modeling_rope_utils)


def rope_params(cfg: dict[str, Any]) -> tuple[float, dict[str, Any]]:
    """(rope_theta, scaling dict). As RotaryEmbeddingConfigMixin: a non-empty rope_scaling wins
    over rope_parameters; rope_theta inside the dict wins over the top-level one."""
    sc = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}
    if not isinstance(sc, dict):
        raise ConvertError("config.json: rope_scaling/rope_parameters is not an object")
    if sc and set(sc) <= {"full_attention", "sliding_attention"}:
        # v5 per-layer-type parameters: fine while every layer type has the same RoPE
        subs = list(sc.values())
        if any(x != subs[0] for x in subs):
            raise ConvertError("config.json: rope_parameters differ per layer type (not supported)")
        sc = subs[0]
    theta = cfg.get("rope_theta") or DEFAULT_THETA.get(cfg.get("model_type"), 10000.0)
    return float(sc.get("rope_theta") or theta), sc


def rope_type(scaling: dict[str, Any]) -> str:
    return scaling.get("rope_type", scaling.get("type", "default")) if scaling else "default"


def _yarn(
    inv: np.ndarray, base: float, dim: int, sc: dict[str, Any], cfg: dict[str, Any]
) -> tuple[np.ndarray, float]:
    # transformers v5: the pretraining context is a top-level original_max_position_embeddings
    # if the config has one, else the dict's, else max_position_embeddings; an absent factor is
    # the ratio of the two contexts (an explicit factor is kept even when they disagree).
    max_pos = int(cfg["max_position_embeddings"])
    orig = int(
        cfg.get("original_max_position_embeddings")
        or sc.get("original_max_position_embeddings")
        or max_pos
    )
    factor = float(sc["factor"]) if sc.get("factor") is not None else max_pos / orig

    def mscale(scale: float, m: float = 1.0) -> float:
        return 1.0 if scale <= 1 else 0.1 * m * math.log(scale) + 1.0

    attn = sc.get("attention_factor")
    if attn is None:
        m, mad = sc.get("mscale"), sc.get("mscale_all_dim")
        attn = mscale(factor, m) / mscale(factor, mad) if m and mad else mscale(factor)
    beta_fast, beta_slow = sc.get("beta_fast") or 32.0, sc.get("beta_slow") or 1.0

    def corr_dim(rot: float) -> float:
        return dim * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

    low, high = corr_dim(beta_fast), corr_dim(beta_slow)
    if sc.get("truncate", True):
        low, high = math.floor(low), math.ceil(high)
    low, high = max(low, 0), min(high, dim - 1)
    if low == high:
        high += 0.001
    ramp = np.clip((np.arange(dim // 2, dtype=np.float64) - low) / (high - low), 0, 1)
    extra = 1.0 - ramp
    return inv / factor * (1 - extra) + inv * extra, float(attn)


def _llama3(inv: np.ndarray, sc: dict[str, Any]) -> np.ndarray:
    factor, lo, hi = (
        float(sc["factor"]),
        float(sc["low_freq_factor"]),
        float(sc["high_freq_factor"]),
    )
    old = float(sc["original_max_position_embeddings"])
    wavelen = 2 * math.pi / inv
    out = np.where(wavelen > old / lo, inv / factor, inv)
    smooth = (old / wavelen - lo) / (hi - lo)
    smoothed = (1 - smooth) * out / factor + smooth * out
    medium = (wavelen >= old / hi) & (wavelen <= old / lo)
    return np.where(medium, smoothed, out)


def compute_rope(cfg: dict[str, Any], head_dim: int) -> tuple[list[float], float]:
    """Inverse frequencies [head_dim/2] with rope scaling applied, and the attention factor."""
    base, sc = rope_params(cfg)
    kind = rope_type(sc)
    for where, v in (
        ("partial_rotary_factor", cfg.get("partial_rotary_factor")),
        ("rope_parameters.partial_rotary_factor", sc.get("partial_rotary_factor")),
    ):
        if v is not None and float(v) != 1.0:
            raise ConvertError(f"config.json: {where} {v} (partial rotary) is not supported")
    inv = 1.0 / base ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    attn = 1.0
    if kind == "linear":
        inv = inv / float(sc["factor"])
    elif kind == "llama3":
        inv = _llama3(inv, sc)
    elif kind == "yarn":
        inv, attn = _yarn(inv, base, head_dim, sc, cfg)
    elif kind != "default":
        raise ConvertError(
            f"config.json: rope_scaling.rope_type '{kind}' is not supported "
            f"({', '.join(ROPE_TYPES)})"
        )
    return [float(v) for v in inv], attn


# ---------------------------------------------------------------- config


def text_part(
    cfg: dict[str, Any],
    classes: dict[str, str],
    wrapper: str,
    text_type: str,
    defaults: dict[str, Any],
) -> dict[str, Any]:
    """The language model's config of a checkpoint whose model_type is a key of `classes` (the
    transformers class each must name in `architectures`), with the class defaults filled in.
    The image-text type `wrapper` keeps it under text_config (whose model_type must be
    `text_type`); "_where" is that prefix, for messages."""
    mt = cfg.get("model_type")
    archs = cfg.get("architectures") or [classes[mt]]
    if archs != [classes[mt]]:
        raise ConvertError(
            f"config.json: architectures {archs} is not supported for model_type {mt} "
            f"({classes[mt]})"
        )
    text, where, src = dict(defaults), "", cfg
    if mt == wrapper:
        src, where = cfg.get("text_config") or {}, "text_config."
        if not isinstance(src, dict):
            raise ConvertError("config.json: text_config is not an object")
        if src.get("model_type", text_type) != text_type:
            raise ConvertError(
                f"config.json: text_config.model_type '{src.get('model_type')}' is not {text_type}"
            )
    text.update(src)
    text["_where"] = where
    return text


def req(cfg: dict[str, Any], key: str, where: str = "") -> Any:
    """cfg[key], refused by name when absent or null."""
    if key not in cfg or cfg[key] is None:
        raise ConvertError(f"config.json: missing '{where}{key}'")
    return cfg[key]


def ids(v: Any) -> list[int]:
    """A token id field (null, an int or a list) as a list."""
    if v is None:
        return []
    return [int(x) for x in v] if isinstance(v, list) else [int(v)]


def first_ids(*fields: Any) -> list[int]:
    """The first of the id fields that is not empty."""
    for v in fields:
        if ids(v):
            return ids(v)
    return []


def merged_ids(*fields: Any) -> list[int]:
    """The ids of all fields, in order, each once."""
    out: list[int] = []
    for e in [x for v in fields for x in ids(v)]:
        if e not in out:
            out.append(e)
    return out


def attention_shape(
    text: dict[str, Any], where: str = "", default_head_dim: int | None = None, even: bool = True
) -> tuple[int, int, int, int]:
    """(hidden_size, heads, kv heads, head_dim), refusing heads that are not a multiple of the
    kv heads and (with even) an odd head_dim."""
    dim, nh = int(req(text, "hidden_size", where)), int(req(text, "num_attention_heads", where))
    nkv = int(text.get("num_key_value_heads") or nh)
    if nh % nkv:
        raise ConvertError(
            f"config.json: {where}num_attention_heads {nh} is not a multiple of "
            f"num_key_value_heads {nkv}"
        )
    hd = int(text.get("head_dim") or default_head_dim or dim // nh)
    if even and hd % 2:
        raise ConvertError(f"config.json: {where}head_dim {hd} is odd (RoPE needs pairs)")
    return dim, nh, nkv, hd
