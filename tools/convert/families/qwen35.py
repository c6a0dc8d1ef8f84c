"""Qwen3.5 / Qwen3.6 dense (hybrid gated-delta-rule + gated attention) for convert.py: config
normalization and the tensor plan.

Families (transformers models/qwen3_5, the Gated DeltaNet pieces shared with models/qwen3_next):
- qwen3_5       Qwen3_5ForConditionalGeneration (the published image-text checkpoints): the
                language model under text_config, tensors under model.language_model.*;
                model.visual.* (vision tower) and mtp.* (multi-token-prediction head) are skipped.
- qwen3_5_text  Qwen3_5ForCausalLM: the language model alone, tensors under model.*.
Qwen3.6 dense checkpoints use the same classes and layout.
Per layer, layer_types[i] is "linear_attention" (Gated DeltaNet) or "full_attention"; without the
list every full_attention_interval-th layer (default 4) is full attention.
- Norms (input, post-attention, final, q_norm, k_norm) are zero-centered, x*rsqrt(..)*(1 + w):
  stored as 1 + w. The DeltaNet output norm (linear_attn.norm) multiplies by w itself.
- Attention: q_proj yields, per head, head_dim query rows then head_dim gate rows; the file stores
  them as attn_q and attn_gate. RoPE covers the first partial_rotary_factor of each head
  (default 0.25) with rope_theta; text positions make the mrope sections collapse to plain RoPE.
- DeltaNet: in_proj_qkv -> ssm_qkv, in_proj_z -> ssm_z, in_proj_b -> ssm_beta,
  in_proj_a -> ssm_alpha, conv1d.weight [C, 1, K] -> ssm_conv [C, K] (f32), dt_bias ->
  ssm_dt_bias, A_log -> ssm_a = -exp(A_log) (f32, as transformers computes it), norm.weight ->
  ssm_norm, out_proj -> ssm_out.
Refused (ConvertError naming the field): attention_bias, attn_output_gate false, a non-silu
hidden_act, a rope type other than default, MoE fields in a dense config (Qwen3.5-MoE is
moe.py's subclass of this family: every layer's MLP is a sparse block, ffn_dim 0).
"""
from __future__ import annotations

import sys
import numpy as np

from .. import safetensors_io as st
from .. import tokenizer as ctok
from .base import Family, Getter, Json, Plan
from ..hf_config import ConvertError, attention_shape, first_ids, merged_ids

MODEL_TYPES = {"qwen3_5": "Qwen3_5ForConditionalGeneration", "qwen3_5_text": "Qwen3_5ForCausalLM"}
# Qwen3_5TextConfig class defaults for the keys read here.
# fmt: off
DEFAULTS = dict(vocab_size=248320, hidden_size=4096, intermediate_size=12288, num_hidden_layers=32,
                num_attention_heads=16, num_key_value_heads=4, hidden_act="silu",
                max_position_embeddings=32768, rms_norm_eps=1e-6, tie_word_embeddings=False,
                attention_bias=False, head_dim=256, linear_conv_kernel_dim=4,
                linear_key_head_dim=128, linear_value_head_dim=128, linear_num_key_heads=16,
                linear_num_value_heads=32)
# fmt: on
SKIP_PREFIXES = ("model.visual.", "visual.", "mtp.", "model.mtp.")
LINEAR, FULL = "linear_attention", "full_attention"


def _check_features(text: Json, moe: bool) -> None:
    w = text["_where"]
    if text.get("hidden_act", "silu") != "silu":
        raise ConvertError(
            f"config.json: {w}hidden_act '{text['hidden_act']}' is not supported (silu)"
        )
    if text.get("attention_bias"):
        raise ConvertError(f"config.json: {w}attention_bias true is not supported")
    if text.get("attn_output_gate") is False:
        raise ConvertError(
            f"config.json: {w}attn_output_gate false is not supported (Qwen3.5 always gates)"
        )
    for key in ("num_experts", "num_experts_per_tok", "moe_intermediate_size"):
        if text.get(key) and not moe:
            raise ConvertError(
                f"config.json: {w}{key} is set in a dense Qwen3.5 config "
                "(Qwen3.5-MoE checkpoints are model_type qwen3_5_moe)"
            )


def layer_types(text: Json, n: int) -> list[str]:
    types = text.get("layer_types")
    if types is None:
        every = int(text.get("full_attention_interval") or 4)
        types = [FULL if (i + 1) % every == 0 else LINEAR for i in range(n)]
    if not isinstance(types, list) or len(types) != n:
        raise ConvertError(
            f"config.json: {text['_where']}layer_types must have num_hidden_layers ({n}) entries"
        )
    for i, t in enumerate(types):
        if t not in (LINEAR, FULL):
            raise ConvertError(
                f"config.json: {text['_where']}layer_types[{i}] '{t}' is not supported "
                f"({LINEAR}, {FULL})"
            )
    return types


def rope(text: Json, head_dim: int) -> tuple[list[float], int]:
    """(inverse frequencies [rot/2], rot): default RoPE over the first rot = head_dim *
    partial_rotary_factor dims (Qwen3_5TextRotaryEmbedding.compute_default_rope_parameters)."""
    w = text["_where"]
    rp = text.get("rope_parameters") or text.get("rope_scaling") or {}
    if not isinstance(rp, dict):
        raise ConvertError(f"config.json: {w}rope_parameters is not an object")
    kind = rp.get("rope_type", rp.get("type", "default"))
    if kind != "default":
        raise ConvertError(
            f"config.json: {w}rope_parameters.rope_type '{kind}' is not supported (default)"
        )
    theta = float(rp.get("rope_theta") or text.get("rope_theta") or 10000.0)
    prf = rp.get("partial_rotary_factor", text.get("partial_rotary_factor", 0.25))
    rot = int(head_dim * float(prf))
    if rot <= 0 or rot % 2 or rot > head_dim:
        raise ConvertError(
            f"config.json: {w}partial_rotary_factor {prf} gives {rot} rotary dims of "
            f"head_dim {head_dim} (need an even count in 2..head_dim)"
        )
    inv = 1.0 / theta ** (np.arange(0, rot, 2, dtype=np.float64) / rot)
    # transformers builds inv_freq in float32: keep those values
    return [float(np.float32(v)) for v in inv], rot


class Qwen35Family(Family):
    name = "qwen3_5"
    model_types = MODEL_TYPES
    wrapper, text_type = "qwen3_5", "qwen3_5_text"
    defaults = DEFAULTS
    skip_prefixes = SKIP_PREFIXES
    layouts = (("model.language_model.", "lm_head.weight"), ("model.", "lm_head.weight"))
    layouts_text = "model.language_model. or model."
    moe = False  # moe.py's Qwen3.5-MoE subclass: experts instead of the dense MLP

    def skip_note(self, n: int) -> str:
        return (
            f"skipping {n} tensors of the vision tower and the multi-token-prediction head "
            "(model.visual.*, mtp.*); the .mlb holds the language model only"
        )

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        """docs/format.md's config keys from a Qwen3.5 config.json."""
        text = self.text_config(cfg)
        _check_features(text, self.moe)
        w = text["_where"]
        dim, nh, nkv, hd = attention_shape(text, w, even=False)  # partial rotary: rope() checks
        n = int(text["num_hidden_layers"])
        types = layer_types(text, n)
        freqs, rot = rope(text, hd)
        nk, nv = int(text["linear_num_key_heads"]), int(text["linear_num_value_heads"])
        if nv % nk:
            raise ConvertError(
                f"config.json: {w}linear_num_value_heads {nv} is not a multiple of "
                f"linear_num_key_heads {nk}"
            )
        raw = self.raw_text(cfg)
        bos = first_ids(
            cfg.get("bos_token_id"), raw.get("bos_token_id"), gen_cfg.get("bos_token_id")
        )
        eos = merged_ids(
            cfg.get("eos_token_id"), raw.get("eos_token_id"), gen_cfg.get("eos_token_id")
        )
        tok_eos = ctok.special_id(tok_json, tok_cfg, "eos_token")
        if tok_eos >= 0 and tok_eos not in eos:
            eos.append(tok_eos)
        n_vocab = int(text["vocab_size"])
        if any(
            e >= n_vocab for e in eos
        ):  # a cut-down embedding (test checkpoints) cannot emit them
            print(
                f"convert: end-of-sequence ids {[e for e in eos if e >= n_vocab]} lie past the "
                f"embedding's {n_vocab} rows and are dropped",
                file=sys.stderr,
            )
            eos = [e for e in eos if e < n_vocab]
        tied = bool(text.get("tie_word_embeddings", False))
        if cfg.get("model_type") == self.wrapper:
            tied = bool(cfg.get("tie_word_embeddings", tied))
        # fmt: off
        return {
            "arch": self.name, "n_vocab": n_vocab, "dim": dim, "n_layers": n,
            "n_heads": nh, "n_kv_heads": nkv, "head_dim": hd,
            "ffn_dim": 0 if self.moe else int(text["intermediate_size"]),
            "norm_eps": float(text.get("rms_norm_eps") or 1e-6),
            "rope_freqs": freqs, "rope_dim": rot,
            "max_ctx": int(text["max_position_embeddings"]), "sliding_window": 0,
            "tie_embeddings": tied, "bos_id": bos[0] if bos else -1, "eos_ids": eos,
            "chat_template": ctok.guess_chat_template(tok_json, tok_cfg),
            "qk_norm": True, "attn_gate": True,
            "layer_linear": [t == LINEAR for t in types],
            "lin_k_heads": nk, "lin_v_heads": nv, "lin_k_dim": int(text["linear_key_head_dim"]),
            "lin_v_dim": int(text["linear_value_head_dim"]),
            "lin_conv": int(text["linear_conv_kernel_dim"]),
        }
        # fmt: on

    def layer_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        """A source 'X#query' / 'X#gate' is half of q_proj X; class "norm" = f32 (vectors and
        the conv kernel)."""
        d, hd = c["dim"], c["head_dim"]
        qd, kvd = c["n_heads"] * hd, c["n_kv_heads"] * hd
        kd, vd = c["lin_k_heads"] * c["lin_k_dim"], c["lin_v_heads"] * c["lin_v_dim"]
        nv, conv = c["lin_v_heads"], 2 * kd + vd
        plan = [(p + "attn_norm", h + "input_layernorm.weight", "norm", (d,))]
        if c["layer_linear"][i]:
            a = h + "linear_attn."
            plan += [
                (p + "ssm_qkv", a + "in_proj_qkv.weight", "ssm_in", (conv, d)),
                (p + "ssm_z", a + "in_proj_z.weight", "ssm_in", (vd, d)),
                (p + "ssm_beta", a + "in_proj_b.weight", "ssm_ab", (nv, d)),
                (p + "ssm_alpha", a + "in_proj_a.weight", "ssm_ab", (nv, d)),
                (p + "ssm_conv", a + "conv1d.weight", "norm", (conv, c["lin_conv"])),
                (p + "ssm_dt_bias", a + "dt_bias", "norm", (nv,)),
                (p + "ssm_a", a + "A_log", "norm", (nv,)),
                (p + "ssm_norm", a + "norm.weight", "norm", (c["lin_v_dim"],)),
                (p + "ssm_out", a + "out_proj.weight", "ssm_out", (d, vd)),
            ]
        else:
            s = h + "self_attn."
            plan += [
                (p + "attn_q", s + "q_proj.weight#query", "q", (qd, d)),
                (p + "attn_gate", s + "q_proj.weight#gate", "q", (qd, d)),
                (p + "attn_k", s + "k_proj.weight", "k", (kvd, d)),
                (p + "attn_v", s + "v_proj.weight", "v", (kvd, d)),
                (p + "attn_q_norm", s + "q_norm.weight", "norm", (hd,)),
                (p + "attn_k_norm", s + "k_norm.weight", "norm", (hd,)),
                (p + "attn_output", s + "o_proj.weight", "o", (d, qd)),
            ]
        plan.append((p + "ffn_norm", h + "post_attention_layernorm.weight", "norm", (d,)))
        return plan + self.ffn_plan(c, i, p, h)

    def source_shape(self, hf: str, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
        if "#" in hf:
            rows, cols = shapes[hf.split("#")[0]]
            return (rows // 2, cols)
        s = tuple(shapes[hf])
        return (s[0], s[2]) if hf.endswith("conv1d.weight") and len(s) == 3 and s[1] == 1 else s

    def shape_hint(self, name: str, hf: str, c: Json) -> str:
        if hf.endswith("#query"):
            return " (q_proj must hold 2 x num_attention_heads x head_dim rows: query and gate)"
        return ""

    def getter(self, ck: st.Checkpoint, plan: Plan, c: Json) -> Getter:
        """Tensor getter applying the stored forms: 1 + w for zero-centered norms, the q_proj
        halves, the conv kernel without its channel axis, and -exp(A_log)."""
        plus_one = {
            hf
            for name, hf, cls, _ in plan
            if cls == "norm"
            and name.endswith(("attn_norm", "ffn_norm", "output_norm", "q_norm", "k_norm"))
        }
        hd = c["head_dim"]

        def get(hf: str, rows: slice) -> np.ndarray:
            if "#" in hf:
                name, half = hf.split("#")
                w = ck.get(name).astype(np.float32)
                w = w.reshape(c["n_heads"], 2, hd, w.shape[-1])[:, 0 if half == "query" else 1]
                return w.reshape(c["n_heads"] * hd, -1)[rows]
            x = ck.get(hf, rows)
            if hf.endswith("conv1d.weight"):
                return x.reshape(x.shape[0], -1).astype(np.float32)
            if hf.endswith("A_log"):
                return -np.exp(x.astype(np.float32))
            return np.float32(1.0) + x.astype(np.float32) if hf in plus_one else x

        return get


QWEN35 = Qwen35Family()
