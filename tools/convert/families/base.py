"""The converter's model families: one Family subclass per kind of checkpoint.

A family turns a Hugging Face checkpoint into docs/format.md's config and tensors:
- matches(cfg): whether config.json's model_type is one of its types;
- normalize_config(cfg, gen_cfg, tok_json, tok_cfg): the .mlb config (ConvertError names what
  it refuses);
- layout(names): the prefix of the language model's tensors and the name of a stored lm_head
  (image-text checkpoints nest the language model);
- tensor_plan(c, base, head): (mlb name, HF name, class, shape) in file order; class "norm" is
  written as F32, the others are matrix classes (convert.py's --q8); a layer's MLP is
  ffn_plan(c, i, p, h) (moe.py's MoeMixin plans the experts of the sparse layers there);
- sources(hf, shape, shapes): the stored tensors a planned source reads (one; moe.py: all
  experts);
- check_tensors(plan, shapes, c, head): refuses missing, extra and mis-shaped tensors and
  returns the ones the family skips (vision towers, multi-token-prediction heads);
- getter(ck, plan, c): reads a planned tensor in its stored form (1 + w norms, split halves).

The families: llama.py (Llama, Mistral, Qwen2, Qwen3, SmolLM2/3), gemma.py (Gemma 2/3), gemma4.py
(Gemma 4), moe.py (Qwen3-MoE, Qwen3.5-MoE) and
qwen35.py (Qwen3.5), registered in families/__init__.py, whose family_for() picks one; hf.py
drives the conversion.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .. import safetensors_io as st
from ..hf_config import ConvertError, rope_params, text_part

Json = dict[str, Any]  # a parsed JSON object: config.json, tokenizer.json, the .mlb config
Plan = list[tuple[str, str, str, tuple[int, ...]]]
Getter = Callable[[str, slice], np.ndarray]
IGNORED_SUFFIXES = ("rotary_emb.inv_freq",)


def names_list(names: list[str]) -> str:
    """The first 8 names, comma separated (and … when there are more)."""
    return f"{', '.join(names[:8])}{' …' if len(names) > 8 else ''}"


def mlp_plan(p: str, h: str, d: int, f: int) -> Plan:
    """The SwiGLU / GeGLU MLP's three matrices of layer prefix p (mlb) / h (HF)."""
    return [
        (p + "ffn_gate", h + "mlp.gate_proj.weight", "gate", (f, d)),
        (p + "ffn_up", h + "mlp.up_proj.weight", "up", (f, d)),
        (p + "ffn_down", h + "mlp.down_proj.weight", "down", (d, f)),
    ]


class Family:
    """The shared behaviour; subclasses set the class attributes and the config rules."""

    name = ""
    model_types: dict[str, str] = {}  # model_type -> the transformers class it must name
    wrapper = ""  # the image-text model_type that nests the text config under text_config
    text_type = ""  # the model_type its text_config must have
    defaults: Json = {}  # config class defaults of the keys read
    skip_prefixes: tuple[str, ...] = ()  # tensors of towers the .mlb leaves out
    records_skipped = True  # the source record counts the skipped tensors
    layouts: tuple[tuple[str, str], ...] = (("model.", "lm_head.weight"),)
    layouts_text = "model."  # the prefixes, for the message when none has an embedding

    def matches(self, cfg: Json) -> bool:
        return cfg.get("model_type") in self.model_types

    def default_q4_rule(self, cfg: Json) -> str:
        return "fit"

    def skip_note(self, n: int) -> str:
        return f"skipping {n} tensors"

    # ------------------------------------------------------------ config

    def text_config(self, cfg: Json) -> Json:
        """The language model's config with the class defaults filled in (text_part)."""
        return text_part(cfg, self.model_types, self.wrapper, self.text_type, self.defaults)

    def raw_text(self, cfg: Json) -> Json:
        """The checkpoint's own text_config (no defaults) of the image-text type, else {}."""
        return (cfg.get("text_config") or {}) if cfg.get("model_type") == self.wrapper else {}

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        raise NotImplementedError

    def rope_record(self, text: Json) -> tuple[float, Json]:
        """(rope_theta, scaling dict) for the .mlb's source record (tools/to_gguf.py reads yarn's
        parameters there): the one RoPE every layer shares."""
        return rope_params(text)

    # ------------------------------------------------------------ tensors

    def layout(self, names: set[str]) -> tuple[str, str]:
        """(prefix of the language model's tensors, name of a stored lm_head)."""
        for base, head in self.layouts:
            if base + "embed_tokens.weight" in names:
                return base, head
        raise ConvertError(f"missing tensors: no embed_tokens.weight under {self.layouts_text}")

    def layer_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        raise NotImplementedError

    def ffn_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        """Layer i's MLP (mlb prefix p, HF prefix h): the dense SwiGLU."""
        return mlp_plan(p, h, c["dim"], c["ffn_dim"])

    def tensor_plan(self, c: Json, base: str = "model.", head: str = "lm_head.weight") -> Plan:
        """(mlb name, HF name, class, expected shape): the embedding, the layers, the final
        norm and, unless tied, the output projection."""
        d, v = c["dim"], c["n_vocab"]
        plan = [("tok_embd", base + "embed_tokens.weight", "embd", (v, d))]
        for i in range(c["n_layers"]):
            plan += self.layer_plan(c, i, f"blk.{i}.", f"{base}layers.{i}.")
        plan.append(("output_norm", base + "norm.weight", "norm", (d,)))
        if not c["tie_embeddings"]:
            plan.append(("output", head, "output", (v, d)))
        return plan

    def sources(
        self, hf: str, shape: tuple[int, ...], shapes: dict[str, tuple[int, ...]]
    ) -> list[str]:
        """The stored tensors that planned source hf (of planned shape) reads ('X#part' reads
        X)."""
        return [hf.split("#")[0]]

    def check_shape(
        self,
        name: str,
        hf: str,
        shape: tuple[int, ...],
        shapes: dict[str, tuple[int, ...]],
        c: Json,
    ) -> None:
        """Refuse a planned source whose stored shape differs from the plan's."""
        if self.source_shape(hf, shapes) != shape:
            src = hf.split("#")[0]
            raise ConvertError(
                f"tensor '{src}' has shape {list(shapes[src])}, expected {list(shape)}"
                + self.shape_hint(name, hf, c)
            )

    def source_shape(self, hf: str, shapes: dict[str, tuple[int, ...]]) -> tuple[int, ...]:
        """The shape of planned source hf as the plan states it."""
        return tuple(shapes[hf])

    def shape_hint(self, name: str, hf: str, c: Json) -> str:
        """More words for a mis-shaped tensor's message."""
        return ""

    def check_heads(self, shapes: dict[str, tuple[int, ...]], c: Json) -> None:
        """A check of the attention heads before the per-tensor shapes (llama-like)."""

    def check_tensors(
        self, plan: Plan, shapes: dict[str, tuple[int, ...]], c: Json, head: str
    ) -> list[str]:
        """Refuse missing, extra or mis-shaped tensors, naming them; returns the skipped ones.
        A planned source 'X#part' is a part of the stored tensor X."""
        skipped = sorted(n for n in shapes if n.startswith(self.skip_prefixes))
        want = {s for _, hf, _, shape in plan for s in self.sources(hf, shape, shapes)}
        have = {
            n
            for n in shapes
            if not n.startswith(self.skip_prefixes) and not n.endswith(IGNORED_SUFFIXES)
        }
        if c["tie_embeddings"]:
            have.discard(head)  # some tied checkpoints still store a copy
        missing, extra = sorted(want - have), sorted(have - want)
        if missing:
            raise ConvertError(f"missing tensors: {names_list(missing)}")
        if extra:
            raise ConvertError(f"unexpected tensors: {names_list(extra)}")
        self.check_heads(shapes, c)
        for name, hf, _, shape in plan:
            self.check_shape(name, hf, shape, shapes, c)
        return skipped

    def getter(self, ck: st.Checkpoint, plan: Plan, c: Json) -> Getter:
        return ck.get
