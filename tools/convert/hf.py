"""A Hugging Face checkpoint directory (config.json, generation_config.json, *.safetensors,
the tokenizer files) to .mlb: its family (families.family_for) normalizes the config and plans
the tensors, writer.write_mlb streams them.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from . import safetensors_io as st
from . import tokenizer as ctok
from .families import family_for
from .hf_config import ConvertError
from .writer import PROG, write_mlb


def _load_json(path: str, required: bool) -> dict[str, Any]:
    if not os.path.isfile(path):
        if required:
            raise ConvertError(f"missing {path}")
        return {}
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def convert_hf(
    d: str,
    out: str,
    qtype: str,
    q8: set[str],
    q4_rule: str | None,
    imatrix_path: str | None = None,
) -> None:
    cfg = _load_json(os.path.join(d, "config.json"), True)
    gen = _load_json(os.path.join(d, "generation_config.json"), False)
    tok_files = ctok.read_tokenizer_files(d)
    fam = family_for(cfg)
    q4_rule = q4_rule or fam.default_q4_rule(cfg)
    if imatrix_path and q4_rule != "fit":
        raise ConvertError("--imatrix weights the Q4_0 'fit' rule: add --q4-rule fit")
    tj, tc = json.loads(tok_files["tokenizer.json"]), json.loads(tok_files["tokenizer_config.json"])
    c = fam.normalize_config(cfg, gen, tj, tc)
    ck = st.Checkpoint(d)
    try:
        shapes = {n: tuple(ck.info(n).shape) for n in ck.names()}
        base, head = fam.layout(set(shapes))
        plan = fam.tensor_plan(c, base, head)
        skipped = fam.check_tensors(plan, shapes, c, head)
        if skipped:
            print(f"convert: {fam.skip_note(len(skipped))}", file=sys.stderr)
        source = {
            "tool": PROG,
            "input": os.path.abspath(d),
            "quant": qtype,
            "q4_rule": q4_rule,
            "q8": sorted(q8),
            "model_type": cfg.get("model_type"),
            "architectures": cfg.get("architectures"),
            "dtypes": sorted({ck.info(n).dtype for n in ck.names()}),
        }
        if fam.records_skipped:
            source["skipped_tensors"] = len(skipped)
        # the RoPE parameters the frequencies came from (tools/to_gguf.py writes yarn's)
        text = fam.text_config(cfg)
        theta, scaling = fam.rope_record(text)
        orig = text.get("original_max_position_embeddings") or scaling.get(
            "original_max_position_embeddings", text.get("max_position_embeddings")
        )
        source["rope"] = {"theta": theta, "scaling": scaling, "original_ctx": orig}
        write_mlb(
            out,
            c,
            plan,
            fam.getter(ck, plan, c),
            tok_files,
            qtype,
            q8,
            q4_rule,
            source,
            imatrix_path,
        )
    finally:
        ck.close()
