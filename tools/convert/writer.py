"""Writing a .mlb: each planned tensor streamed from its getter, quantized a block of rows at a
time (so memory stays near one tensor), under a temporary name until complete (mlb.MlbWriter).
A getter gets a slice of the tensor's rows; a 3-D tensor's rows are counted through its first
two axes (row_blocks).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

import numpy as np

from . import imatrix, mlb, quant
from . import tokenizer as ctok
from .families.base import Getter, Plan
from .hf_config import ConvertError

PROG = "convert.py"  # the command's name: in messages and in the file's source.tool
MATRIX_CLASSES = (
    "q",
    "k",
    "v",
    "o",
    "gate",
    "up",
    "down",
    "embd",
    "output",
    "ssm_in",
    "ssm_ab",
    "ssm_out",
    "ple",
)  # ssm_*: Qwen3.5 DeltaNet projections; ple: Gemma 4's per-layer embedding table and matrices
ROW_BLOCK_ELEMS = 1 << 22


def row_blocks(shape: tuple[int, ...]) -> list[slice]:
    """The blocks of rows a matrix is streamed in: slices of its rows counted through all axes
    but the last (a 3-D [n, rows, cols] tensor, MoE experts, is n matrices one after another),
    about ROW_BLOCK_ELEMS each, never across two matrices, so each is quantized as it would
    be alone."""
    rows, n = shape[-2], int(np.prod(shape[:-2], dtype=np.int64))
    step = max(1, ROW_BLOCK_ELEMS // shape[-1])
    return [
        slice(m * rows + r, m * rows + min(rows, r + step))
        for m in range(n)
        for r in range(0, rows, step)
    ]


def parse_q8(text: str) -> set[str]:
    classes = {x.strip() for x in text.split(",") if x.strip()}
    bad = classes - set(MATRIX_CLASSES)
    if bad:
        raise ConvertError(
            f"--q8: unknown class(es) {sorted(bad)} (choose from {','.join(MATRIX_CLASSES)})"
        )
    return classes


def dtype_for(cls: str, qtype: str, q8: set[str]) -> str:
    if cls == "norm":
        return "f32"
    if qtype == "q4_0" and cls in q8:
        return "q8_0"
    return qtype


def chat_template_note(c: dict[str, Any], tok_files: dict[str, bytes]) -> str:
    """What the file says about the chat template (config chat_template, a renderer name), and
    where the converter got it; printed after conversion so that a model without one is no
    surprise at `ml_run --chat auto`."""
    try:
        tmpl = json.loads(tok_files.get("tokenizer_config.json") or b"{}").get("chat_template")
    except (ValueError, AttributeError):
        tmpl = None
    name = c.get("chat_template") or ""
    if name:
        where = (
            "guessed from the checkpoint's chat template and vocabulary"
            if tmpl
            else "guessed from the vocabulary: the checkpoint has no chat template"
        )
        return f"chat template: '{name}' recorded ({where}); ml_run --chat auto uses it"
    why = (
        "the checkpoint's chat template matches no built-in renderer"
        if tmpl
        else "the checkpoint has no chat template and the vocabulary suggests none"
    )
    return f"chat template: none recorded ({why}); pick one with ml_run --chat NAME"


def write_mlb(
    out: str,
    c: dict[str, Any],
    plan: Plan,
    get: Getter,
    tok_files: dict[str, bytes],
    qtype: str,
    q8: set[str],
    q4_rule: str,
    source: dict[str, Any],
    imatrix_path: str | None = None,
) -> None:
    importance = load_importance(imatrix_path, plan, qtype, q8, source)
    specs = [mlb.TensorSpec(n, "bytes", (len(tok_files[n]),)) for n in ctok.TOKENIZER_FILES]
    dtypes = {}
    for name, hf, cls, shape in plan:
        dt = dtype_for(cls, qtype, q8)
        if dt in quant.BLOCK_BYTES and shape[-1] % quant.QK:
            raise ConvertError(f"tensor '{hf}' has {shape[-1]} cols, not a multiple of 32 for {dt}")
        dtypes[name] = dt
        specs.append(mlb.TensorSpec(name, dt, shape))
    # no file at `out` unless every tensor was written (mlb.AtomicFile; Ctrl-C included)
    with mlb.MlbWriter(out, "model", specs, c, source) as w:
        for n in ctok.TOKENIZER_FILES:
            w.add(n, tok_files[n])
        t_all = time.time()
        for i, (name, hf, _, shape) in enumerate(plan):
            t0 = time.time()
            w.begin(name)
            if len(shape) == 1:
                w.write(quant.quantize(get(hf, slice(None)), dtypes[name], q4_rule))
            else:
                imp = importance.get(name)
                for rows in row_blocks(shape):
                    x = get(hf, rows)
                    if imp is not None and imp.ndim == 2:  # experts: the block's expert's
                        w.write(
                            quant.quantize(x, dtypes[name], q4_rule, imp[rows.start // shape[-2]])
                        )
                    else:
                        w.write(quant.quantize(x, dtypes[name], q4_rule, imp))
            mb = int(np.prod(shape)) * 4 / 1e6
            print(
                f"convert: [{i + 1}/{len(plan)}] {name:22s} {dtypes[name]:5s} "
                f"{str(list(shape)):14s} {mb / max(time.time() - t0, 1e-9):8.1f} MB/s",
                file=sys.stderr,
            )
    print(
        f"convert: wrote {out} ({os.path.getsize(out) / 1e6:.1f} MB) "
        f"in {time.time() - t_all:.1f} s",
        file=sys.stderr,
    )
    print(f"convert: {chat_template_note(c, tok_files)}", file=sys.stderr)


def load_importance(
    path: str | None, plan: Plan, qtype: str, q8: set[str], source: dict[str, Any]
) -> dict[str, np.ndarray]:
    """Per Q4_0 matrix of the plan, its column weights from an imatrix file: the mean square of
    each input channel, plus 0.1% of their mean so that no column is ignored entirely."""
    if not path:
        return {}
    try:
        entries, tokens = imatrix.read(path)
    except imatrix.ImatrixError as e:
        raise ConvertError(str(e)) from None
    out, missing = {}, []

    def weights(key: str, cols: int) -> np.ndarray | None:
        e = entries.get(key)
        if e is None:
            return None
        if len(e.sum2) != cols:
            raise ConvertError(
                f"{path}: '{key}' has {len(e.sum2)} input channels there, {cols} here "
                "(an imatrix of another model?)"
            )
        ms = e.mean_square()
        return (ms + 1e-3 * ms.mean()).astype(np.float32)

    for name, _, cls, shape in plan:
        if len(shape) not in (2, 3) or dtype_for(cls, qtype, q8) != "q4_0":
            continue
        if len(shape) == 3:  # experts, one entry each ("NAME.E"); one never routed to: even
            per = [weights(f"{name}.{e}", shape[-1]) for e in range(shape[0])]
            if all(w is None for w in per):
                missing.append(name)
                continue
            even = np.ones(shape[-1], np.float32)
            out[name] = np.stack([even if w is None else w for w in per])
            continue
        w = weights(name, shape[1])
        if w is None:
            missing.append(name)
            continue
        out[name] = w
    if not out and not missing:
        print(f"convert: --imatrix: no Q4_0 matrices to weight ({qtype})", file=sys.stderr)
    else:
        note = (
            f"; no entry for {len(missing)} (unweighted): {', '.join(missing[:4])}"
            if missing
            else ""
        )
        print(
            f"convert: imatrix {path} ({tokens} tokens): {len(out)} Q4_0 matrices weighted{note}",
            file=sys.stderr,
        )
    source["imatrix"] = {"file": os.path.basename(path), "tokens": tokens, "weighted": len(out)}
    return out
