"""Mixture-of-Experts families for convert.py: Qwen3-MoE and Qwen3.5-MoE (docs/format.md,
"Mixture of Experts"). Rules after transformers' models/qwen3_moe and models/qwen3_5_moe
(modeling_*.py, configuration_*.py):

- The sparse block: router logits = x Wr^T (mlp.gate, Linear(hidden, num_experts), no bias);
  p = softmax over all experts (float32); the num_experts_per_tok largest p (torch.topk: equal
  values in index order); divided by their sum when norm_topk_prob (Qwen3-MoE: the config key,
  default false; Qwen3.5-MoE: always, there is no such key); out = sum of w_e * down_e(silu(
  gate_e(x)) * up_e(x)) over the chosen experts. Qwen3.5-MoE adds a shared expert, a SwiGLU of
  shared_expert_intermediate_size rows times sigmoid(x . mlp.shared_expert_gate) ([1, hidden]).
- qwen3_moe (Qwen3MoeForCausalLM): layer i is sparse when i is not in mlp_only_layers,
  num_experts > 0 and (i + 1) % decoder_sparse_step == 0 (Qwen3MoeDecoderLayer); other layers
  keep the dense MLP of intermediate_size. Attention is Qwen3's (q/k RMSNorm); head_dim defaults
  to hidden_size / num_attention_heads (Qwen3MoeConfig has no head_dim default, unlike Qwen3).
  use_sliding_window true is refused.
- qwen3_5_moe (Qwen3_5MoeForConditionalGeneration, text_config of model_type qwen3_5_moe_text,
  tensors under model.language_model.*; vision tower and MTP head skipped) and
  qwen3_5_moe_text (Qwen3_5MoeForCausalLM, model.*): Qwen3.5 (qwen35.py) with every layer's MLP
  a sparse block with the shared expert; ffn_dim is 0 (no dense layer).
- Expert tensors, either layout, per layer (both families): per expert
  mlp.experts.E.{gate,up,down}_proj.weight ([I, H], [I, H], [H, I]: the Qwen3-MoE hub files), or
  fused mlp.experts.gate_up_proj [E, 2I, H] (rows 0..I-1 gate, I..2I-1 up) and
  mlp.experts.down_proj [E, H, I] (no .weight suffix: the Qwen3.5-MoE hub files and
  transformers v5's own parameters). Both give the same .mlb bytes. A layer mixing them is
  refused (the other layout's tensors are unexpected).
Written: blk.N.ffn_gate_inp (router, F32), ffn_{gate,up,down}_exps [E, I, H] / [E, H, I] in the
type of their class (gate/up/down; quantized expert by expert, row by row, as 2-D matrices),
and with a shared expert ffn_{gate,up,down}_shexp and ffn_gate_inp_shexp (F32 [1, H]).
"""

from __future__ import annotations

from typing import Any

from .. import safetensors_io as st
from .base import Getter, Json, Plan
from .llama import LlamaFamily, common_config
from .qwen35 import DEFAULTS as QWEN35_DEFAULTS
from .qwen35 import Qwen35Family
from ..hf_config import ConvertError

Shapes = dict[str, tuple[int, ...]]
MARK = "@"  # a planned source "<layer>.mlp.experts@gate|up|down": one class of all experts
PARTS = ("gate", "up", "down")


def _int(text: Json, key: str, lo: int, what: str) -> int:
    v = text.get(key)
    if isinstance(v, bool) or not isinstance(v, int) or v < lo:
        raise ConvertError(f"config.json: {text['_where']}{key} {v!r} is not {what}")
    return v


def moe_config(text: Json, sparse: list[bool], norm_topk: bool, shared: int) -> Json:
    """docs/format.md's MoE keys; refuses a config without experts, k outside 1..E, a missing
    expert size."""
    w = text["_where"]
    n = _int(text, "num_experts", 0, "an expert count")
    if n == 0:
        raise ConvertError(
            f"config.json: {w}num_experts is 0: a MoE checkpoint without experts is not supported"
        )
    k = _int(text, "num_experts_per_tok", 1, "a positive count of experts per token")
    if k > n:
        raise ConvertError(f"config.json: {w}num_experts_per_tok {k} is more than num_experts {n}")
    # fmt: off
    return {
        "n_experts": n, "n_experts_used": k,
        "expert_ffn_dim": _int(text, "moe_intermediate_size", 1, "a positive size"),
        "norm_topk_prob": bool(norm_topk), "shared_expert_ffn_dim": shared, "layer_moe": sparse,
    }
    # fmt: on


def qwen3_moe_layers(text: Json, n_layers: int) -> list[bool]:
    """Qwen3MoeDecoderLayer's rule: sparse when not in mlp_only_layers and (i + 1) %
    decoder_sparse_step == 0 (num_experts > 0: moe_config refuses 0)."""
    step = _int(text, "decoder_sparse_step", 1, "a positive layer step")
    only = text.get("mlp_only_layers") or []
    if not isinstance(only, list) or any(
        isinstance(i, bool) or not isinstance(i, int) for i in only
    ):
        raise ConvertError(
            f"config.json: {text['_where']}mlp_only_layers {only!r} is not a list of layer indices"
        )
    return [i not in only and (i + 1) % step == 0 for i in range(n_layers)]


class MoeMixin:
    """The sparse layers' tensors, before a Family class in the bases: plan, checks, getter."""

    def ffn_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        if not c["layer_moe"][i]:
            return super().ffn_plan(c, i, p, h)  # type: ignore[misc]
        d, n, f, s = c["dim"], c["n_experts"], c["expert_ffn_dim"], c["shared_expert_ffn_dim"]
        m = h + "mlp."
        # the router and the shared expert's gate are vectors of weights: F32 ("norm" class)
        plan = [
            (p + "ffn_gate_inp", m + "gate.weight", "norm", (n, d)),
            (p + "ffn_gate_exps", m + "experts" + MARK + "gate", "gate", (n, f, d)),
            (p + "ffn_up_exps", m + "experts" + MARK + "up", "up", (n, f, d)),
            (p + "ffn_down_exps", m + "experts" + MARK + "down", "down", (n, d, f)),
        ]
        if s:
            e = m + "shared_expert."
            plan += [
                (p + "ffn_gate_inp_shexp", m + "shared_expert_gate.weight", "norm", (1, d)),
                (p + "ffn_gate_shexp", e + "gate_proj.weight", "gate", (s, d)),
                (p + "ffn_up_shexp", e + "up_proj.weight", "up", (s, d)),
                (p + "ffn_down_shexp", e + "down_proj.weight", "down", (d, s)),
            ]
        return plan

    @staticmethod
    def fused(base: str, names: Any) -> bool:
        """Whether the layer's experts (base '<layer>.mlp.experts') are stored fused."""
        return base + ".gate_up_proj" in names or base + ".down_proj" in names

    def sources(self, hf: str, shape: tuple[int, ...], shapes: Shapes) -> list[str]:
        if MARK not in hf:
            return super().sources(hf, shape, shapes)  # type: ignore[misc]
        base, part = hf.split(MARK)
        if self.fused(base, shapes):
            return [base + (".down_proj" if part == "down" else ".gate_up_proj")]
        return [f"{base}.{e}.{part}_proj.weight" for e in range(shape[0])]

    def check_shape(
        self, name: str, hf: str, shape: tuple[int, ...], shapes: Shapes, c: Json
    ) -> None:
        if MARK not in hf:
            return super().check_shape(name, hf, shape, shapes, c)  # type: ignore[misc]
        base, part = hf.split(MARK)
        n, rows, cols = shape
        if self.fused(base, shapes):
            src = self.sources(hf, shape, shapes)[0]
            want = (n, rows, cols) if part == "down" else (n, 2 * rows, cols)
            what = "hidden, I" if part == "down" else "2 x I, hidden"
            if tuple(shapes[src]) != want:
                raise ConvertError(
                    f"tensor '{src}' has shape {list(shapes[src])}, expected {list(want)} "
                    f"(num_experts, {what}; I = moe_intermediate_size)"
                )
            return None
        for src in self.sources(hf, shape, shapes):
            if tuple(shapes[src]) != (rows, cols):
                raise ConvertError(
                    f"tensor '{src}' has shape {list(shapes[src])}, expected {[rows, cols]} "
                    "(every expert's matrix has the shape moe_intermediate_size and hidden_size "
                    "give)"
                )
        return None

    def getter(self, ck: st.Checkpoint, plan: Plan, c: Json) -> Getter:
        """Expert sources read rows of one expert at a time: the writer's row blocks of a 3-D
        tensor never cross two experts (writer.row_blocks)."""
        inner = super().getter(ck, plan, c)  # type: ignore[misc]
        f = c.get("expert_ffn_dim", 0)

        def get(hf: str, rows: slice):
            if MARK not in hf:
                return inner(hf, rows)
            base, part = hf.split(MARK)
            per = c["dim"] if part == "down" else f  # rows of one expert's matrix
            e, r0 = divmod(rows.start, per)
            r1 = rows.stop - e * per
            if r1 > per:
                raise ValueError(f"rows {rows} of '{hf}' cross two experts")
            if not self.fused(base, ck.where):
                return ck.get(f"{base}.{e}.{part}_proj.weight", slice(r0, r1))
            if part == "down":
                return ck.get(base + ".down_proj", (e, slice(r0, r1)))
            off = f if part == "up" else 0  # gate_up_proj: gate rows, then up rows
            return ck.get(base + ".gate_up_proj", (e, slice(off + r0, off + r1)))

        return get


# Qwen3MoeConfig class defaults of the keys read.
# fmt: off
QWEN3_MOE_DEFAULTS = dict(vocab_size=151936, hidden_size=2048, intermediate_size=6144,
                          num_hidden_layers=24, num_attention_heads=32, num_key_value_heads=4,
                          hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6,
                          tie_word_embeddings=False, attention_bias=False,
                          use_sliding_window=False, decoder_sparse_step=1,
                          moe_intermediate_size=768, num_experts_per_tok=8, num_experts=128,
                          norm_topk_prob=False, mlp_only_layers=[])
# fmt: on


class Qwen3MoeFamily(MoeMixin, LlamaFamily):
    name = "qwen3_moe"
    model_types = {"qwen3_moe": "Qwen3MoeForCausalLM"}
    defaults = QWEN3_MOE_DEFAULTS

    def matches(self, cfg: Json) -> bool:
        return cfg.get("model_type") in self.model_types

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        text = self.text_config(cfg)
        if text.get("hidden_act") != "silu":
            raise ConvertError(f"config.json: hidden_act '{text['hidden_act']}' is not supported")
        for key in ("attention_bias", "mlp_bias", "use_sliding_window"):
            if text.get(key):
                raise ConvertError(f"config.json: {key} true is not supported (Qwen3-MoE)")
        c = common_config(text, self.name, gen_cfg, tok_json, tok_cfg, None, None)
        c["qkv_bias"], c["qk_norm"] = False, True
        sparse = qwen3_moe_layers(text, c["n_layers"])
        c.update(moe_config(text, sparse, bool(text.get("norm_topk_prob")), 0))
        return c


class Qwen35MoeFamily(MoeMixin, Qwen35Family):
    name = "qwen3_5_moe"
    model_types = {
        "qwen3_5_moe": "Qwen3_5MoeForConditionalGeneration",
        "qwen3_5_moe_text": "Qwen3_5MoeForCausalLM",
    }
    wrapper, text_type = "qwen3_5_moe", "qwen3_5_moe_text"
    moe = True
    # Qwen3_5MoeTextConfig class defaults (no intermediate_size: there is no dense MLP)
    defaults = {
        **{k: v for k, v in QWEN35_DEFAULTS.items() if k != "intermediate_size"},
        **dict(hidden_size=2048, num_hidden_layers=40, num_attention_heads=16,
               num_key_value_heads=2, max_position_embeddings=32768, moe_intermediate_size=512,
               shared_expert_intermediate_size=512, num_experts_per_tok=8, num_experts=256),
    }  # fmt: skip

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        c = super().normalize_config(cfg, gen_cfg, tok_json, tok_cfg)
        text = self.text_config(cfg)
        shared = _int(text, "shared_expert_intermediate_size", 1, "a positive size")
        # Qwen3_5MoeTopKRouter divides by the sum unconditionally (norm_topk_prob is no key)
        c.update(moe_config(text, [True] * c["n_layers"], True, shared))
        return c


QWEN3_MOE = Qwen3MoeFamily()
QWEN35_MOE = Qwen35MoeFamily()
