"""Hugging Face config.json -> docs/format.md config keys (used by convert.py).

One table per family says which transformers class it is and which of the small per-family
features it has; the rules below follow transformers' configuration_*.py / modeling_*.py:

- qwen2: q/k/v projections always have biases (o_proj and the MLP never). A layer slides when
  use_sliding_window is true, sliding_window is set and its index >= max_window_layers
  (Qwen2Config.__post_init__ nulls sliding_window unless use_sliding_window, then builds
  layer_types); an explicit layer_types list wins over that rule.
- qwen3: as qwen2 for windows, no biases unless attention_bias (which also biases o_proj, so it
  is refused), per-head RMSNorm of q and k (q_norm/k_norm, [head_dim]); head_dim defaults to 128.
- smollm3: no_rope_layers[i] == 1 means layer i USES RoPE, 0 means a NoPE layer; without the list,
  layer i is NoPE when (i + 1) % no_rope_layer_interval == 0 (interval default 4). A layer slides
  only with use_sliding_window, a sliding_window, and layer_types[i] == "sliding_attention" (the
  default layer_types make the NoPE layers slide). rope_theta defaults to 2e6.
- llama (Llama 2/3, TinyLlama, SmolLM2), mistral: as before.
RoPE scaling follows modeling_rope_utils.py (transformers v5): inverse frequencies over head_dim.
"""
from __future__ import annotations

import json
import math
import os
import sys
from typing import Any, Callable

import numpy as np

import convert_tokenizer as ctok
import safetensors_io as st

ARCHS = {"llama": "LlamaForCausalLM", "mistral": "MistralForCausalLM", "qwen2": "Qwen2ForCausalLM",
         "qwen3": "Qwen3ForCausalLM", "smollm3": "SmolLM3ForCausalLM"}
DEFAULT_THETA = {"smollm3": 2000000.0}          # SmolLM3Config.default_theta; others 10000
DEFAULT_HEAD_DIM = {"qwen3": 128}               # Qwen3Config.head_dim default
DEFAULT_TIED = {"smollm3": True}                # SmolLM3Config.tie_word_embeddings default
WINDOW_ARCHS = ("qwen2", "qwen3", "smollm3")    # per-layer windows (layer_window key)
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


def _yarn(inv: np.ndarray, base: float, dim: int, sc: dict[str, Any], cfg: dict[str, Any]) -> tuple[np.ndarray, float]:
    # transformers v5: the pretraining context is a top-level original_max_position_embeddings
    # if the config has one, else the dict's, else max_position_embeddings; an absent factor is
    # the ratio of the two contexts (an explicit factor is kept even when they disagree).
    max_pos = int(cfg["max_position_embeddings"])
    orig = int(cfg.get("original_max_position_embeddings") or sc.get("original_max_position_embeddings") or max_pos)
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
    factor, lo, hi = float(sc["factor"]), float(sc["low_freq_factor"]), float(sc["high_freq_factor"])
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
    for where, v in (("partial_rotary_factor", cfg.get("partial_rotary_factor")),
                     ("rope_parameters.partial_rotary_factor", sc.get("partial_rotary_factor"))):
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
        raise ConvertError(f"config.json: rope_scaling.rope_type '{kind}' is not supported "
                           f"({', '.join(ROPE_TYPES)})")
    return [float(v) for v in inv], attn


# ---------------------------------------------------------------- config

def text_part(cfg: dict[str, Any], classes: dict[str, str], wrapper: str, text_type: str,
              defaults: dict[str, Any]) -> dict[str, Any]:
    """The language model's config of a checkpoint whose model_type is a key of `classes` (the
    transformers class each must name in `architectures`), with the class defaults filled in.
    The image-text type `wrapper` keeps it under text_config (whose model_type must be
    `text_type`); "_where" is that prefix, for messages."""
    mt = cfg.get("model_type")
    archs = cfg.get("architectures") or [classes[mt]]
    if archs != [classes[mt]]:
        raise ConvertError(f"config.json: architectures {archs} is not supported for model_type {mt} "
                           f"({classes[mt]})")
    text, where, src = dict(defaults), "", cfg
    if mt == wrapper:
        src, where = cfg.get("text_config") or {}, "text_config."
        if not isinstance(src, dict):
            raise ConvertError("config.json: text_config is not an object")
        if src.get("model_type", text_type) != text_type:
            raise ConvertError(f"config.json: text_config.model_type '{src.get('model_type')}' is not {text_type}")
    text.update(src)
    text["_where"] = where
    return text


def _req(cfg: dict[str, Any], key: str) -> Any:
    if key not in cfg or cfg[key] is None:
        raise ConvertError(f"config.json: missing '{key}'")
    return cfg[key]


def check_supported(cfg: dict[str, Any]) -> str:
    """The arch name, or a refusal naming the offending field."""
    mt = cfg.get("model_type")
    if mt not in ARCHS:
        raise ConvertError(f"config.json: model_type '{mt}' is not supported ({', '.join(ARCHS)})")
    archs = cfg.get("architectures") or [ARCHS[mt]]
    if archs != [ARCHS[mt]]:
        raise ConvertError(f"config.json: architectures {archs} is not supported ({ARCHS[mt]})")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"config.json: hidden_act '{cfg['hidden_act']}' is not supported (silu)")
    # Qwen2's q/k/v biases are hard-wired (no config key); elsewhere attention_bias also biases
    # o_proj, which the runtime does not have.
    if cfg.get("attention_bias") and mt != "qwen2":
        raise ConvertError("config.json: attention_bias true (an o_proj bias besides q/k/v) is not supported")
    if cfg.get("mlp_bias"):
        raise ConvertError("config.json: mlp_bias true is not supported")
    return mt


def _ids(v: Any) -> list[int]:
    if v is None:
        return []
    return [int(x) for x in v] if isinstance(v, list) else [int(v)]


def layer_rope(cfg: dict[str, Any], arch: str, n_layers: int) -> list[bool] | None:
    """SmolLM3: per layer, whether RoPE is applied (no_rope_layers: 1 = RoPE, 0 = NoPE)."""
    if arch != "smollm3":
        return None
    flags = cfg.get("no_rope_layers")
    if flags is None:
        interval = int(cfg.get("no_rope_layer_interval") or 4)
        return [(i + 1) % interval != 0 for i in range(n_layers)]
    if not isinstance(flags, list) or len(flags) < n_layers or any(f not in (0, 1) for f in flags):
        raise ConvertError(f"config.json: no_rope_layers must list 0/1 for each of the {n_layers} layers")
    return [bool(f) for f in flags[:n_layers]]


def layer_window(cfg: dict[str, Any], arch: str, n_layers: int, rope: list[bool] | None) -> list[int] | None:
    """Per-layer sliding window (0 = full attention) for the families that have one."""
    if arch not in WINDOW_ARCHS:
        return None
    use = bool(cfg.get("use_sliding_window", False))
    sw = cfg.get("sliding_window") if use else None
    types = cfg.get("layer_types")
    if types is None:
        if arch == "smollm3":
            types = ["sliding_attention" if sw and not rope[i] else "full_attention" for i in range(n_layers)]
        else:
            mwl = int(cfg.get("max_window_layers", 28))
            types = ["sliding_attention" if sw is not None and i >= mwl else "full_attention"
                     for i in range(n_layers)]
    if not isinstance(types, list) or len(types) != n_layers:
        raise ConvertError(f"config.json: layer_types must have num_hidden_layers ({n_layers}) entries")
    out = []
    for i, t in enumerate(types):
        if t not in ("full_attention", "sliding_attention"):
            raise ConvertError(f"config.json: layer_types[{i}] '{t}' is not supported "
                               "(full_attention, sliding_attention)")
        if t == "sliding_attention" and not (use and sw):
            raise ConvertError(f"config.json: layer_types[{i}] is sliding_attention but "
                               f"use_sliding_window is {use} and sliding_window is {cfg.get('sliding_window')}")
        out.append(int(sw) if t == "sliding_attention" else 0)
    return out


def normalize_config(cfg: dict[str, Any], gen_cfg: dict[str, Any], tok_json: dict[str, Any],
                     tok_cfg: dict[str, Any]) -> dict[str, Any]:
    """docs/format.md's config keys from a Hugging Face config.json."""
    arch = check_supported(cfg)
    dim, n_heads = int(_req(cfg, "hidden_size")), int(_req(cfg, "num_attention_heads"))
    n_kv = int(cfg.get("num_key_value_heads") or n_heads)
    if n_heads % n_kv:
        raise ConvertError(f"config.json: num_attention_heads {n_heads} is not a multiple of "
                           f"num_key_value_heads {n_kv}")
    head_dim = int(cfg.get("head_dim") or DEFAULT_HEAD_DIM.get(arch) or dim // n_heads)
    if head_dim % 2:
        raise ConvertError(f"config.json: head_dim {head_dim} is odd (RoPE needs pairs)")
    n_layers = int(_req(cfg, "num_hidden_layers"))
    rope_freqs, attn = compute_rope(cfg, head_dim)
    sw = cfg.get("sliding_window") if arch == "mistral" else None
    bos = _ids(cfg.get("bos_token_id")) or _ids(gen_cfg.get("bos_token_id"))
    bos_id = bos[0] if bos else ctok.special_id(tok_json, tok_cfg, "bos_token")
    eos: list[int] = []
    for e in _ids(cfg.get("eos_token_id")) + _ids(gen_cfg.get("eos_token_id")):
        if e not in eos:
            eos.append(e)
    if not eos and ctok.special_id(tok_json, tok_cfg, "eos_token") >= 0:
        eos = [ctok.special_id(tok_json, tok_cfg, "eos_token")]
    c = {
        "arch": arch, "n_vocab": int(_req(cfg, "vocab_size")), "dim": dim,
        "n_layers": n_layers, "n_heads": n_heads, "n_kv_heads": n_kv, "head_dim": head_dim,
        "ffn_dim": int(_req(cfg, "intermediate_size")), "norm_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "rope_freqs": rope_freqs, "rope_attn_factor": attn,
        "max_ctx": int(cfg.get("max_position_embeddings", 2048)),
        "sliding_window": int(sw or 0), "tie_embeddings": bool(cfg.get("tie_word_embeddings", DEFAULT_TIED.get(arch, False))),
        "bos_id": bos_id, "eos_ids": eos, "chat_template": ctok.guess_chat_template(tok_json, tok_cfg),
    }
    if arch in WINDOW_ARCHS:
        rope = layer_rope(cfg, arch, n_layers)
        c["qkv_bias"] = arch == "qwen2"
        c["qk_norm"] = arch == "qwen3"
        c["layer_window"] = layer_window(cfg, arch, n_layers, rope)
        if rope is not None:
            c["layer_rope"] = rope
    return c


def convert_family(fam: Any, d: str, out: str, cfg: dict[str, Any], gen: dict[str, Any],
                   tok_files: dict[str, bytes], qtype: str, q8: set[str], q4_rule: str,
                   write_mlb: Callable, prog: str, getter: Callable, skip_note: Callable[[int], str]) -> None:
    """The HF conversion path of the families whose checkpoints may carry towers the .mlb leaves
    out (gemma.py, qwen35.py). fam is the family's module: normalize_config, layout, tensor_plan
    and check_tensors; getter(ck, plan, c) reads a planned tensor; skip_note(n) says what the n
    skipped tensors were. write_mlb is convert.write_mlb."""
    tj, tc = json.loads(tok_files["tokenizer.json"]), json.loads(tok_files["tokenizer_config.json"])
    c = fam.normalize_config(cfg, gen, tj, tc)
    ck = st.Checkpoint(d)
    try:
        shapes = {n: tuple(ck.info(n).shape) for n in ck.names()}
        base, head = fam.layout(set(shapes))
        plan = fam.tensor_plan(c, base, head)
        skipped = fam.check_tensors(plan, shapes, c, head)
        if skipped:
            print(f"convert: {skip_note(len(skipped))}", file=sys.stderr)
        source = {"tool": prog, "input": os.path.abspath(d), "quant": qtype, "q4_rule": q4_rule,
                  "q8": sorted(q8), "model_type": cfg.get("model_type"), "architectures": cfg.get("architectures"),
                  "dtypes": sorted({ck.info(n).dtype for n in ck.names()}), "skipped_tensors": len(skipped)}
        write_mlb(out, c, plan, getter(ck, plan, c), tok_files, qtype, q8, q4_rule, source)
    finally:
        ck.close()
