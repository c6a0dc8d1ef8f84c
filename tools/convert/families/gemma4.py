"""Gemma 4 (text) for convert.py: config normalization and the tensor plan.

Families (transformers models/gemma4; docs/architecture.md lists the features):
- gemma4_text  Gemma4ForCausalLM, tensors under model.*;
- gemma4       Gemma4ForConditionalGeneration (every released checkpoint): the text model under
               text_config, tensors under model.language_model.*; the vision and audio towers
               (model.vision_tower.*, model.embed_vision.*, model.audio_tower.*,
               model.embed_audio.*) are skipped.
Config (Gemma4TextConfig): layer_types (default every sixth layer full; the last layer is made
full, as __post_init__ does), sliding layers of head_dim with num_key_value_heads, full layers
of global_head_dim with num_global_key_value_heads where attention_k_eq_v (per_layer_config's
head_dim / num_key_value_heads, in newer saves, win); rope_parameters per layer type: sliding
"default" over head_dim, full "proportional" (_compute_proportional_rope_parameters: θ^(-2j/hd)
for j < partial_rotary_factor·hd/2, then zeros; divided by factor); num_kv_shared_layers (the
last N layers attend over the K/V of the last earlier layer of their type: layer_kv_source);
use_double_wide_mlp (those layers' MLP twice intermediate_size); hidden_size_per_layer_input
(per-layer embeddings); enable_moe_block (experts beside the dense MLP: moe_beside_mlp);
final_logit_softcapping. Norms multiply by the weight itself (stored as is); v_norm and the
router's norm have no weight; the attention scale is 1.
Refused (ConvertError naming the field): a non-tanh GELU, attention_bias, bidirectional text
attention ("all"), a rope type other than default/proportional, a per-layer embedding
vocabulary other than vocab_size, KV-shared layers without an earlier layer of their type.
Google's checkpoints keep k_proj/v_proj/k_norm on the KV-shared layers, which transformers
never builds: they are skipped (counted in the source record) like the towers.
"""
from __future__ import annotations

import math

import numpy as np

from .. import tokenizer as ctok
from .base import Family, Json, Plan, mlp_plan
from .gemma import GELU_TANH
from .moe import MARK, MoeMixin, Shapes
from ..hf_config import ConvertError, attention_shape, first_ids, ids, merged_ids

MODEL_TYPES = {"gemma4": "Gemma4ForConditionalGeneration", "gemma4_text": "Gemma4ForCausalLM"}
SLIDING, FULL = "sliding_attention", "full_attention"
# Gemma4TextConfig's class defaults of the keys read.
# fmt: off
DEFAULTS = dict(vocab_size=262144, hidden_size=2304, intermediate_size=9216, num_hidden_layers=30,
                num_attention_heads=8, num_key_value_heads=4, head_dim=256, global_head_dim=512,
                num_global_key_value_heads=None, hidden_activation="gelu_pytorch_tanh",
                max_position_embeddings=131072, rms_norm_eps=1e-6, bos_token_id=2,
                eos_token_id=1, tie_word_embeddings=True, attention_bias=False,
                sliding_window=512, final_logit_softcapping=None,
                use_bidirectional_attention=None, vocab_size_per_layer_input=262144,
                hidden_size_per_layer_input=256, attention_k_eq_v=False, num_kv_shared_layers=0,
                enable_moe_block=False, use_double_wide_mlp=False, num_experts=None,
                top_k_experts=None, moe_intermediate_size=None)
ROPE_DEFAULT = {SLIDING: {"rope_type": "default", "rope_theta": 10000.0},
                FULL: {"rope_type": "proportional", "partial_rotary_factor": 0.25,
                       "rope_theta": 1000000.0}}
# fmt: on
TOWERS = (
    "model.vision_tower.",
    "model.embed_vision.",
    "model.audio_tower.",
    "model.embed_audio.",
)
KV_PARTS = ("k_proj", "v_proj", "k_norm", "v_norm")  # what KV-shared layers do not use


def layer_types(text: Json, n: int) -> list[str]:
    w = text["_where"]
    types = text.get("layer_types")
    if types is None:
        types = [SLIDING if (i + 1) % 6 else FULL for i in range(n)]
    if not isinstance(types, list) or len(types) != n:
        raise ConvertError(f"config.json: {w}layer_types must have num_hidden_layers ({n}) entries")
    for i, t in enumerate(types):
        if t not in (SLIDING, FULL):
            raise ConvertError(
                f"config.json: {w}layer_types[{i}] '{t}' is not supported ({FULL}, {SLIDING})"
            )
    return types[:-1] + [FULL]  # Gemma4TextConfig makes the last layer full


def rope_table(text: Json, p: Json, hd: int, kind: str) -> list[float]:
    """One layer type's inverse frequencies: a pair per two dims of a head of hd."""
    w = text["_where"]
    rt = p.get("rope_type", "default")
    base, factor = float(p.get("rope_theta") or 0), float(p.get("factor") or 1.0)
    if base <= 0:
        raise ConvertError(f"config.json: {w}rope_parameters.{kind}.rope_theta is missing")
    if rt == "default":
        inv = [1.0 / base ** (2 * j / hd) for j in range(hd // 2)]
    elif rt == "proportional":
        angles = int(float(p.get("partial_rotary_factor", 1.0)) * hd // 2)
        inv = [1.0 / base ** (2 * j / hd) for j in range(angles)] + [0.0] * (hd // 2 - angles)
        inv = [x / factor for x in inv]
    else:
        raise ConvertError(
            f"config.json: {w}rope_parameters.{kind}.rope_type '{rt}' is not supported "
            "(default, proportional)"
        )
    return [float(np.float32(x)) for x in inv]


class Gemma4Family(MoeMixin, Family):
    name = "gemma4"
    model_types = MODEL_TYPES
    wrapper, text_type = "gemma4", "gemma4_text"
    defaults = DEFAULTS
    skip_prefixes = TOWERS
    layouts = (("model.language_model.", "lm_head.weight"), ("model.", "lm_head.weight"))
    layouts_text = "model.language_model. or model."

    def default_q4_rule(self, cfg: Json) -> str:
        return "round"

    def skip_note(self, n: int) -> str:
        return (
            f"skipping {n} tensors: the vision and audio towers and the KV-shared layers' unused "
            "k_proj/v_proj/k_norm; the .mlb holds the text model only"
        )

    # ------------------------------------------------------------ config

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        """docs/format.md's config keys from a Gemma 4 config.json."""
        text = self.text_config(cfg)
        w = text["_where"]
        act = text.get("hidden_activation")
        if act not in GELU_TANH:
            raise ConvertError(
                f"config.json: {w}hidden_activation '{act}' is not supported "
                f"({', '.join(GELU_TANH)})"
            )
        if text.get("attention_bias"):
            raise ConvertError(f"config.json: {w}attention_bias true is not supported")
        if text.get("use_bidirectional_attention") == "all":
            raise ConvertError(
                f"config.json: {w}use_bidirectional_attention 'all' is not supported (causal "
                "LMs only; 'vision' concerns image tokens, which the text model never sees)"
            )
        dim, nh, nkv, hd = attention_shape(text, w)
        n = int(text["num_hidden_layers"])
        types = layer_types(text, n)
        ghd = int(text.get("global_head_dim") or 0)
        plc = text.get("per_layer_config") or {}
        head_dims, kv_heads = [], []
        for i, t in enumerate(types):
            own = plc.get(str(i)) or {}
            head_dims.append(int(own.get("head_dim") or (ghd if t == FULL and ghd else hd)))
            alt = bool(text.get("attention_k_eq_v")) and t == FULL
            g = text.get("num_global_key_value_heads") if alt else None
            kv_heads.append(int(own.get("num_key_value_heads") or g or nkv))
            if nh % kv_heads[-1] or head_dims[-1] % 2:
                raise ConvertError(
                    f"config.json: {w}layer {i}: {nh} heads over {kv_heads[-1]} KV heads of "
                    f"{head_dims[-1]} (heads must be a multiple, head sizes even)"
                )
        window = int(text.get("sliding_window") or 0)
        if SLIDING in types and window <= 0:
            raise ConvertError(f"config.json: {w}sliding_window is {window} but layers slide")
        rp = text.get("rope_parameters") or ROPE_DEFAULT
        tables, sizes = {}, {}
        for t in set(types):
            p = rp.get(t) if isinstance(rp, dict) else None
            if not isinstance(p, dict):
                raise ConvertError(f"config.json: {w}rope_parameters has no '{t}' entry")
            dims = {h for h, lt in zip(head_dims, types) if lt == t}
            if len(dims) != 1:
                raise ConvertError(
                    f"config.json: {w}the {t} layers have head sizes {sorted(dims)} (one RoPE "
                    "table per layer type)"
                )
            sizes[t] = dims.pop()
            tables[t] = rope_table(text, p, sizes[t], t)
        shared = int(text.get("num_kv_shared_layers") or 0)
        first = n - shared
        sources = []
        for i, t in enumerate(types):
            if i < first:
                sources.append(-1)
                continue
            owners = [j for j in range(first) if types[j] == t]
            if not owners:
                raise ConvertError(
                    f"config.json: {w}num_kv_shared_layers {shared}: layer {i} ({t}) has no "
                    "earlier layer of its type to share K/V with"
                )
            sources.append(owners[-1])
            j = owners[-1]
            if (head_dims[j], kv_heads[j]) != (head_dims[i], kv_heads[i]):
                raise ConvertError(
                    f"config.json: {w}layer {i} shares K/V of a differently shaped layer {j}"
                )
        ffn = int(text["intermediate_size"])
        wide = bool(text.get("use_double_wide_mlp")) and first > 0
        P = int(text.get("hidden_size_per_layer_input") or 0)
        vocab = int(text["vocab_size"])
        if P and int(text.get("vocab_size_per_layer_input") or vocab) != vocab:
            raise ConvertError(
                f"config.json: {w}vocab_size_per_layer_input "
                f"{text['vocab_size_per_layer_input']} differs from vocab_size {vocab}"
            )
        raw = self.raw_text(cfg)
        bos = first_ids(
            cfg.get("bos_token_id"), raw.get("bos_token_id"), gen_cfg.get("bos_token_id")
        )
        eos = merged_ids(
            cfg.get("eos_token_id"), raw.get("eos_token_id"), gen_cfg.get("eos_token_id")
        ) or ids(text.get("eos_token_id"))
        pieces = ctok.token_ids(tok_json)
        chat = "gemma4" if "<|turn>" in pieces else ""
        tied = bool(cfg.get("tie_word_embeddings", text.get("tie_word_embeddings", True)))
        sliding = [t == SLIDING for t in types]
        # fmt: off
        c: Json = {
            "arch": self.name, "n_vocab": vocab, "dim": dim, "n_layers": n, "n_heads": nh,
            "n_kv_heads": nkv, "head_dim": hd, "ffn_dim": ffn,
            "norm_eps": float(text.get("rms_norm_eps") or 1e-6),
            "rope_freqs": tables.get(FULL) or tables[SLIDING],
            "rope_dim": sizes.get(FULL) or sizes[SLIDING], "rope_attn_factor": 1.0,
            "max_ctx": int(text["max_position_embeddings"]), "sliding_window": 0,
            "tie_embeddings": tied,
            "bos_id": bos[0] if bos else int(text.get("bos_token_id", -1) or -1), "eos_ids": eos,
            "chat_template": chat, "activation": "gelu_tanh",
            "embd_scale": float(np.float32(math.sqrt(dim))), "attn_scale": 1.0,
            "final_softcap": float(text.get("final_logit_softcapping") or 0.0),
            "post_norms": True, "qk_norm": True, "v_norm": True, "layer_scale": True,
            "layer_window": [window if s else 0 for s in sliding],
            "layer_head_dim": head_dims, "layer_kv_heads": kv_heads,
            "layer_ffn_dim": [ffn * (2 if wide and i >= first else 1) for i in range(n)],
            "layer_kv_source": sources,
            "layer_v_from_k": [bool(text.get("attention_k_eq_v")) and t == FULL for t in types],
        }
        # fmt: on
        if SLIDING in tables and FULL in tables:
            c["rope_freqs_local"] = tables[SLIDING]
            c["rope_dim_local"] = sizes[SLIDING]
            c["layer_rope_local"] = sliding
        if P:
            c["per_layer_dim"] = P
        if text.get("enable_moe_block"):
            e, k = text.get("num_experts"), text.get("top_k_experts")
            inter = text.get("moe_intermediate_size") or text.get("expert_intermediate_size")
            if not (isinstance(e, int) and e > 0 and isinstance(k, int) and 1 <= k <= e):
                raise ConvertError(
                    f"config.json: {w}num_experts {e!r} / top_k_experts {k!r}: need 1 <= k <= E"
                )
            if not (isinstance(inter, int) and inter > 0):
                raise ConvertError(f"config.json: {w}moe_intermediate_size {inter!r} is not a size")
            c.update(
                layer_moe=[True] * n, n_experts=e, n_experts_used=k, expert_ffn_dim=inter,
                norm_topk_prob=True, shared_expert_ffn_dim=0, moe_beside_mlp=True,
            )  # fmt: skip
        return c

    def rope_record(self, text: Json) -> tuple[float, Json]:
        """The full layers' RoPE (the sliding layers' is default RoPE of its own theta)."""
        p = (text.get("rope_parameters") or ROPE_DEFAULT).get(FULL) or {}
        return float(p.get("rope_theta") or 0.0), dict(p)

    # ------------------------------------------------------------ tensors

    def tensor_plan(self, c: Json, base: str = "model.", head: str = "lm_head.weight") -> Plan:
        plan = super().tensor_plan(c, base, head)
        P = c.get("per_layer_dim", 0)
        if P:
            n, d, v = c["n_layers"], c["dim"], c["n_vocab"]
            plan[1:1] = [
                ("per_layer_token_embd", base + "embed_tokens_per_layer.weight", "ple", (v, n * P)),
                ("per_layer_model_proj", base + "per_layer_model_projection.weight", "ple",
                 (n * P, d)),
                ("per_layer_proj_norm", base + "per_layer_projection_norm.weight", "norm", (P,)),
            ]  # fmt: skip
        return plan

    def layer_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        d, nh = c["dim"], c["n_heads"]
        hd, nkv = c["layer_head_dim"][i], c["layer_kv_heads"][i]
        a = h + "self_attn."
        plan: Plan = [
            (p + "attn_norm", h + "input_layernorm.weight", "norm", (d,)),
            (p + "attn_q", a + "q_proj.weight", "q", (nh * hd, d)),
        ]
        if c["layer_kv_source"][i] < 0:
            plan.append((p + "attn_k", a + "k_proj.weight", "k", (nkv * hd, d)))
            if not c["layer_v_from_k"][i]:
                plan.append((p + "attn_v", a + "v_proj.weight", "v", (nkv * hd, d)))
        plan.append((p + "attn_q_norm", a + "q_norm.weight", "norm", (hd,)))
        if c["layer_kv_source"][i] < 0:
            plan.append((p + "attn_k_norm", a + "k_norm.weight", "norm", (hd,)))
        plan += [
            (p + "attn_output", a + "o_proj.weight", "o", (d, nh * hd)),
            (p + "attn_post_norm", h + "post_attention_layernorm.weight", "norm", (d,)),
            (p + "ffn_norm", h + "pre_feedforward_layernorm.weight", "norm", (d,)),
            *mlp_plan(p, h, d, c["layer_ffn_dim"][i]),
            (p + "ffn_post_norm", h + "post_feedforward_layernorm.weight", "norm", (d,)),
        ]
        if c.get("moe_beside_mlp"):
            e, f = c["n_experts"], c["expert_ffn_dim"]
            x = h + "experts" + MARK
            plan += [
                (p + "ffn_gate_inp", h + "router.proj.weight", "norm", (e, d)),
                (p + "ffn_gate_inp_scale", h + "router.scale", "norm", (d,)),
                (p + "ffn_down_exps_scale", h + "router.per_expert_scale", "norm", (e,)),
                (p + "ffn_norm_2", h + "pre_feedforward_layernorm_2.weight", "norm", (d,)),
                (p + "ffn_gate_exps", x + "gate", "gate", (e, f, d)),
                (p + "ffn_up_exps", x + "up", "up", (e, f, d)),
                (p + "ffn_down_exps", x + "down", "down", (e, d, f)),
                (p + "ffn_post_norm_1", h + "post_feedforward_layernorm_1.weight", "norm", (d,)),
                (p + "ffn_post_norm_2", h + "post_feedforward_layernorm_2.weight", "norm", (d,)),
            ]
        P = c.get("per_layer_dim", 0)
        if P:
            plan += [
                (p + "inp_gate", h + "per_layer_input_gate.weight", "ple", (P, d)),
                (p + "proj", h + "per_layer_projection.weight", "ple", (d, P)),
                (p + "post_norm", h + "post_per_layer_input_norm.weight", "norm", (d,)),
            ]
        plan.append((p + "layer_output_scale", h + "layer_scalar", "norm", (1,)))
        return plan

    def check_tensors(self, plan: Plan, shapes: Shapes, c: Json, head: str) -> list[str]:
        """The towers and the KV-shared layers' unused K/V tensors are skipped."""
        base = next(hf for name, hf, _, _ in plan if name == "tok_embd")[
            : -len("embed_tokens.weight")
        ]
        unused = {
            f"{base}layers.{i}.self_attn.{x}.weight"
            for i, s in enumerate(c["layer_kv_source"])
            if s >= 0
            for x in KV_PARTS
        }
        kept = {k: v for k, v in shapes.items() if k not in unused}
        return sorted(
            super().check_tensors(plan, kept, c, head) + [n for n in shapes if n in unused]
        )

    def shape_hint(self, name: str, hf: str, c: Json) -> str:
        if not name.endswith(("attn_q", "attn_k", "attn_v", "attn_output")):
            return ""
        i = int(name.split(".")[1])
        return (
            f" (layer {i}: head size {c['layer_head_dim'][i]}, {c['n_heads']} heads, "
            f"{c['layer_kv_heads'][i]} KV heads, hidden_size {c['dim']})"
        )


GEMMA4 = Gemma4Family()
