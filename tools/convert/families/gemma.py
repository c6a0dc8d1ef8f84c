"""Gemma 2 / Gemma 3 (text) for convert.py: config normalization and the tensor plan.

Families (transformers models/gemma2, models/gemma3):
- gemma2       Gemma2ForCausalLM. Layer i slides when layer_types[i] == "sliding_attention";
               without layer_types the even layers slide (Gemma2Config: (i + 1) % 2 != 0).
               attn_logit_softcapping (default 50) caps scores as cap*tanh(s/cap) before the mask,
               final_logit_softcapping (default 30) caps the logits; an explicit null turns a cap
               off.
- gemma3_text  Gemma3ForCausalLM (the 1B checkpoint). Without layer_types, layer i slides when
               (i + 1) % sliding_window_pattern != 0 (pattern default 6: every 6th layer is global).
               Sliding layers use default RoPE with rope_local_base_freq (default 1e4); global
               layers rope_theta (default 1e6) with rope_scaling (v5: rope_parameters
               {"full_attention": ..., "sliding_attention": ...}). q_norm/k_norm per head.
               final_logit_softcapping is applied by Gemma3ForCausalLM when set.
- gemma3       Gemma3ForConditionalGeneration (4B/12B/27B image-text): the text model under
               text_config, tensors under language_model.model.* (hub checkpoints) or
               model.language_model.* (transformers >= 4.52 saves); vision_tower.* and
               multi_modal_projector.* are skipped. Its forward applies no final soft-cap.
Both: Gemma RMSNorm x*rsqrt(mean(x^2)+eps)*(1+w) in float32 (stored as 1+w), GELU-tanh gating,
embeddings times sqrt(hidden_size) (a float32 tensor), q.k scaled by query_pre_attn_scalar^-0.5,
sandwich norms (input, post_attention [on the attention output], pre_feedforward,
post_feedforward), tied embeddings by default, sliding window: key j visible to query i when
i - j < window (masking_utils.sliding_window_overlay: kv_idx > q_idx - window).
Refused (ConvertError naming the field): a non-tanh GELU, attention_bias, bidirectional
attention, attn_logit_softcapping on Gemma 3 (transformers' Gemma3Attention never applies it),
final_logit_softcapping on the image-text class (its forward ignores it).
"""
from __future__ import annotations

import math
import numpy as np

from .. import safetensors_io as st
from .. import tokenizer as ctok
from .base import Family, Getter, Json, Plan, mlp_plan
from ..hf_config import (
    ConvertError,
    attention_shape,
    compute_rope,
    first_ids,
    ids,
    merged_ids,
    text_part,
)

MODEL_TYPES = {
    "gemma2": "Gemma2ForCausalLM",
    "gemma3_text": "Gemma3ForCausalLM",
    "gemma3": "Gemma3ForConditionalGeneration",
}
GELU_TANH = ("gelu_pytorch_tanh", "gelu_new")  # ACT2FN names of the tanh approximation
# Class defaults of the config keys the converter reads (Gemma2Config, Gemma3TextConfig).
# fmt: off
DEFAULTS = {
    "gemma2": dict(vocab_size=256000, hidden_size=2304, intermediate_size=9216,
                   num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                   head_dim=256, max_position_embeddings=8192, rms_norm_eps=1e-6,
                   rope_theta=10000.0, query_pre_attn_scalar=256, sliding_window=4096,
                   final_logit_softcapping=30.0, attn_logit_softcapping=50.0,
                   tie_word_embeddings=True, bos_token_id=2, eos_token_id=1),
    "gemma3_text": dict(vocab_size=262208, hidden_size=2304, intermediate_size=9216,
                        num_hidden_layers=26, num_attention_heads=8, num_key_value_heads=4,
                        head_dim=256, max_position_embeddings=131072, rms_norm_eps=1e-6,
                        rope_theta=1000000.0, rope_local_base_freq=10000.0,
                        query_pre_attn_scalar=256, sliding_window=4096, sliding_window_pattern=6,
                        final_logit_softcapping=None, attn_logit_softcapping=None,
                        tie_word_embeddings=True, bos_token_id=2, eos_token_id=1),
}
# fmt: on
VISION_PREFIXES = (
    "vision_tower.",
    "multi_modal_projector.",
    "model.vision_tower.",
    "model.multi_modal_projector.",
)
Q4_RULE = {"gemma2": "fit", "gemma3": "round"}  # --q4-rule default per arch (docs/quantization.md)


def _check_features(cfg: Json, text: Json, arch: str) -> None:
    w = text["_where"]
    act = text.get("hidden_activation", "gelu_pytorch_tanh")
    if act not in GELU_TANH:
        raise ConvertError(
            f"config.json: {w}hidden_activation '{act}' is not supported ({', '.join(GELU_TANH)})"
        )
    if text.get("attention_bias"):
        raise ConvertError(f"config.json: {w}attention_bias true is not supported")
    if text.get("use_bidirectional_attention"):
        raise ConvertError(
            f"config.json: {w}use_bidirectional_attention true is not supported (causal LMs only)"
        )
    if arch == "gemma3" and text.get("attn_logit_softcapping") is not None:
        raise ConvertError(
            f"config.json: {w}attn_logit_softcapping {text['attn_logit_softcapping']} on Gemma 3 "
            "(transformers' Gemma3Attention does not apply it, so its meaning is unclear)"
        )
    if cfg.get("model_type") == "gemma3" and text.get("final_logit_softcapping") is not None:
        raise ConvertError(
            f"config.json: {w}final_logit_softcapping {text['final_logit_softcapping']} on "
            "Gemma3ForConditionalGeneration (its forward does not apply it, so its meaning is "
            "unclear)"
        )


def layer_types(text: Json, arch: str, n: int) -> list[str]:
    types = text.get("layer_types")
    if types is None:
        if arch == "gemma2":
            types = ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)]
        else:
            pat = int(text.get("sliding_window_pattern") or 6)
            types = ["sliding_attention" if (i + 1) % pat else "full_attention" for i in range(n)]
    if not isinstance(types, list) or len(types) != n:
        raise ConvertError(
            f"config.json: {text['_where']}layer_types must have num_hidden_layers ({n}) entries"
        )
    for i, t in enumerate(types):
        if t not in ("full_attention", "sliding_attention"):
            raise ConvertError(
                f"config.json: {text['_where']}layer_types[{i}] '{t}' is not supported "
                "(full_attention, sliding_attention)"
            )
    return types


def _rope_dicts(text: Json) -> tuple[Json, Json]:
    """Gemma 3 (global, local) rope parameter dicts with rope_theta set, as
    Gemma3TextConfig.convert_rope_params_to_dict builds them."""
    rp = text.get("rope_parameters") or {}
    if not isinstance(rp, dict):
        raise ConvertError(f"config.json: {text['_where']}rope_parameters is not an object")
    nested = bool(rp) and set(rp) <= {"full_attention", "sliding_attention"}
    glob = dict(rp.get("full_attention") or {}) if nested else dict(rp)
    loc = dict(rp.get("sliding_attention") or {}) if nested else {}
    if text.get("rope_scaling"):
        glob.update(text["rope_scaling"])
    glob.setdefault("rope_type", glob.get("type", "default"))
    loc.setdefault("rope_type", loc.get("type", "default"))
    glob.setdefault("rope_theta", text.get("rope_theta") or 1000000.0)
    loc.setdefault("rope_theta", text.get("rope_local_base_freq") or 10000.0)
    return glob, loc


def _rope(text: Json, sc: Json, head_dim: int) -> tuple[list[float], float]:
    fake = {
        "rope_scaling": sc,
        "rope_theta": sc["rope_theta"],
        "max_position_embeddings": text["max_position_embeddings"],
    }
    if text.get("original_max_position_embeddings"):
        fake["original_max_position_embeddings"] = text["original_max_position_embeddings"]
    if text.get("partial_rotary_factor") is not None:
        fake["partial_rotary_factor"] = text["partial_rotary_factor"]
    return compute_rope(fake, head_dim)


def _gemma2_rope(text: Json) -> Json:
    sc = text.get("rope_scaling") or text.get("rope_parameters") or {}
    if sc and set(sc) <= {"full_attention", "sliding_attention"}:
        subs = list(sc.values())
        if any(x != subs[0] for x in subs):
            raise ConvertError(
                "config.json: rope_parameters differ per layer type (not supported for gemma2)"
            )
        sc = subs[0]
    sc = dict(sc)
    sc.setdefault("rope_type", sc.get("type", "default"))
    sc.setdefault("rope_theta", text.get("rope_theta") or 10000.0)
    return sc


class GemmaFamily(Family):
    name = "gemma"
    model_types = MODEL_TYPES
    wrapper, text_type = "gemma3", "gemma3_text"
    skip_prefixes = VISION_PREFIXES
    layouts = (
        ("language_model.model.", "language_model.lm_head.weight"),
        ("model.language_model.", "lm_head.weight"),
        ("model.", "lm_head.weight"),
    )
    layouts_text = "model., language_model.model. or model.language_model."

    def default_q4_rule(self, cfg: Json) -> str:
        return Q4_RULE["gemma2" if cfg.get("model_type") == "gemma2" else "gemma3"]

    def skip_note(self, n: int) -> str:
        return (
            f"skipping the vision tower: {n} tensors (vision_tower.*, multi_modal_projector.*); "
            "the .mlb holds the text model only"
        )

    def text_config(self, cfg: Json) -> Json:
        """The text config with the class defaults of its type filled in."""
        mt = cfg.get("model_type")
        if mt not in MODEL_TYPES:
            raise ConvertError(
                f"config.json: model_type '{mt}' is not a Gemma 2/3 type ({', '.join(MODEL_TYPES)})"
            )
        return text_part(
            cfg,
            MODEL_TYPES,
            "gemma3",
            "gemma3_text",
            DEFAULTS["gemma3_text" if mt == "gemma3" else mt],
        )

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        """docs/format.md's config keys from a Gemma 2/3 config.json."""
        text = self.text_config(cfg)
        arch = "gemma2" if cfg.get("model_type") == "gemma2" else "gemma3"
        _check_features(cfg, text, arch)
        w = text["_where"]
        dim, nh, nkv, hd = attention_shape(text, w)
        n = int(text["num_hidden_layers"])
        types = layer_types(text, arch, n)
        window = text.get("sliding_window")
        if "sliding_attention" in types and not window:
            raise ConvertError(
                f"config.json: {w}sliding_window is {window} but layer_types has sliding layers"
            )
        if arch == "gemma2":
            rope_freqs, attn = _rope(text, _gemma2_rope(text), hd)
        else:
            glob, loc = _rope_dicts(text)
            rope_freqs, attn = _rope(text, glob, hd)
            local_freqs, local_attn = _rope(text, loc, hd)
            if "sliding_attention" in types and local_attn != attn:
                raise ConvertError(
                    f"config.json: {w}rope attention factors differ between global ({attn}) and "
                    f"local ({local_attn}) layers (one rope_attn_factor in the format)"
                )
        caps = {
            k: float(text.get(k) or 0.0)
            for k in ("attn_logit_softcapping", "final_logit_softcapping")
        }
        raw = self.raw_text(cfg)
        bos = first_ids(
            cfg.get("bos_token_id"), raw.get("bos_token_id"), gen_cfg.get("bos_token_id")
        )
        eos = merged_ids(
            cfg.get("eos_token_id"), raw.get("eos_token_id"), gen_cfg.get("eos_token_id")
        )
        if not eos:  # the class default (1, <eos>) and the tokenizer's end token
            eos = ids(text.get("eos_token_id"))
            tok_eos = ctok.special_id(tok_json, tok_cfg, "eos_token")
            if tok_eos >= 0 and tok_eos not in eos:
                eos.append(tok_eos)
        vocab = ctok.token_ids(tok_json)
        tmpl = tok_cfg.get("chat_template") or ""
        chat = "gemma" if "<start_of_turn>" in vocab or "<start_of_turn>" in str(tmpl) else ""
        tied = bool(text.get("tie_word_embeddings", True))
        if cfg.get("model_type") == "gemma3":
            tied = tied and bool(cfg.get("tie_word_embeddings", True))
        # fmt: off
        c = {
            "arch": arch, "n_vocab": int(text["vocab_size"]), "dim": dim, "n_layers": n,
            "n_heads": nh, "n_kv_heads": nkv, "head_dim": hd,
            "ffn_dim": int(text["intermediate_size"]),
            "norm_eps": float(text.get("rms_norm_eps") or 1e-6),
            "rope_freqs": rope_freqs, "rope_attn_factor": attn,
            "max_ctx": int(text["max_position_embeddings"]), "sliding_window": 0,
            "tie_embeddings": tied,
            "bos_id": bos[0] if bos else int(text.get("bos_token_id", -1) or -1), "eos_ids": eos,
            "chat_template": chat,
            "activation": "gelu_tanh",
            "embd_scale": float(np.float32(math.sqrt(dim))),
            "attn_scale": float(text.get("query_pre_attn_scalar") or 256) ** -0.5,
            "attn_softcap": caps["attn_logit_softcapping"] if arch == "gemma2" else 0.0,
            "final_softcap": caps["final_logit_softcapping"],
            "post_norms": True, "qk_norm": arch == "gemma3",
            "layer_window": [int(window) if t == "sliding_attention" else 0 for t in types],
        }
        # fmt: on
        if arch == "gemma3":
            c["rope_freqs_local"] = local_freqs
            c["layer_rope_local"] = [t == "sliding_attention" for t in types]
        return c

    def layer_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        """Gemma norms are class "norm" (F32 vectors, stored as 1 + w)."""
        d, hd, f = c["dim"], c["head_dim"], c["ffn_dim"]
        qd, kvd = c["n_heads"] * hd, c["n_kv_heads"] * hd
        return [
            (p + "attn_norm", h + "input_layernorm.weight", "norm", (d,)),
            (p + "attn_q", h + "self_attn.q_proj.weight", "q", (qd, d)),
            (p + "attn_k", h + "self_attn.k_proj.weight", "k", (kvd, d)),
            (p + "attn_v", h + "self_attn.v_proj.weight", "v", (kvd, d)),
            *(
                [
                    (p + f"attn_{x}_norm", h + f"self_attn.{x}_norm.weight", "norm", (hd,))
                    for x in ("q", "k")
                ]
                if c["qk_norm"]
                else []
            ),
            (p + "attn_output", h + "self_attn.o_proj.weight", "o", (d, qd)),
            (p + "attn_post_norm", h + "post_attention_layernorm.weight", "norm", (d,)),
            (p + "ffn_norm", h + "pre_feedforward_layernorm.weight", "norm", (d,)),
            *mlp_plan(p, h, d, f),
            (p + "ffn_post_norm", h + "post_feedforward_layernorm.weight", "norm", (d,)),
        ]

    def shape_hint(self, name: str, hf: str, c: Json) -> str:
        if not name.endswith(("attn_q", "attn_k")):
            return ""
        q = name.endswith("q")
        return (
            f" (head_dim {c['head_dim']} x {'num_attention_heads' if q else 'num_key_value_heads'}"
            f" {c['n_heads'] if q else c['n_kv_heads']}, hidden_size {c['dim']})"
        )

    def getter(self, ck: st.Checkpoint, plan: Plan, c: Json) -> Getter:
        """Gemma's (1 + w) norms stored as the multiplier, computed in float32."""
        plus_one = {hf for _, hf, cls, _ in plan if cls == "norm"}

        def get(hf: str, rows: slice) -> np.ndarray:
            x = ck.get(hf, rows)
            return np.float32(1.0) + x.astype(np.float32) if hf in plus_one else x

        return get


GEMMA = GemmaFamily()
