#!/usr/bin/env python3
"""Convert a Hugging Face checkpoint (or a llama2.c one) to .mlb.

Families: Llama/Mistral/Qwen2/Qwen3/SmolLM2/SmolLM3 (llama.py), Gemma 2/3 (gemma.py), Qwen3.5
(qwen35.py): family.py's Family subclasses, in FAMILIES.

Usage:
  tools/convert.py HF_DIR -o OUT.mlb [--quant f32|f16|q8_0|q4_0] [--q8 CLASSES]
                   [--q4-rule fit|round]
  tools/convert.py llama2c CKPT.bin TOKDIR -o OUT.mlb [same options]

The family normalizes the config into docs/format.md's keys (rope inverse frequencies computed
with the checkpoint's rope scaling by hf_config.py, following transformers'
modeling_rope_utils). Tensors are streamed one at a time and a block of rows at a time, so
memory stays near one tensor.
"""
from __future__ import annotations

import argparse
import json
import os
import struct
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_tokenizer as ctok  # noqa: E402
import imatrix  # noqa: E402
import mlb  # noqa: E402
import quant  # noqa: E402
import safetensors_io as st  # noqa: E402
from family import Family, Getter, Plan  # noqa: E402
from gemma import GEMMA  # noqa: E402
from hf_config import ConvertError, rope_params  # noqa: E402
from llama import LLAMA  # noqa: E402
from qwen35 import QWEN35  # noqa: E402

PROG = "convert.py"
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
)  # ssm_*: Qwen3.5 DeltaNet projections
ROW_BLOCK_ELEMS = 1 << 22
# The family registry: the first that matches config.json's model_type converts it; the
# llama-like family is the fallback that names what is not supported.
FAMILIES: tuple[Family, ...] = (GEMMA, QWEN35, LLAMA)


def family_for(cfg: dict[str, Any]) -> Family:
    return next(f for f in FAMILIES if f.matches(cfg))


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


# ---------------------------------------------------------------- writing


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
                step = max(1, ROW_BLOCK_ELEMS // shape[-1])
                for r in range(0, shape[0], step):
                    x = get(hf, slice(r, min(shape[0], r + step)))
                    w.write(quant.quantize(x, dtypes[name], q4_rule, importance.get(name)))
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
    for name, _, cls, shape in plan:
        if len(shape) != 2 or dtype_for(cls, qtype, q8) != "q4_0":
            continue
        e = entries.get(name)
        if e is None:
            missing.append(name)
            continue
        if len(e.sum2) != shape[1]:
            raise ConvertError(
                f"{path}: '{name}' has {len(e.sum2)} input channels there, {shape[1]} here "
                "(an imatrix of another model?)"
            )
        ms = e.mean_square()
        out[name] = (ms + 1e-3 * ms.mean()).astype(np.float32)
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
        theta, scaling = rope_params(text)
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


# ---------------------------------------------------------------- llama2.c


def interleaved_to_hf(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama2.c/Meta q,k row order (pairs 2i,2i+1) -> HF rotate_half order, as HF's
    convert_llama_weights_to_hf permute()."""
    rows, cols = w.shape
    hd = rows // n_heads
    return w.reshape(n_heads, hd // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def llama2c_source(path: str) -> tuple[dict[str, Any], Getter]:
    """A HF-style config and a tensor getter (HF names) for a llama2.c version-0 checkpoint."""
    with open(path, "rb") as f:
        dim, hidden, L, nh, nkv, vocab, seq = struct.unpack("<7i", f.read(28))
    shared, vocab = vocab > 0, abs(vocab)
    hd = dim // nh
    m = np.memmap(path, dtype="<f4", mode="r", offset=28)
    layout: list[tuple[str, tuple[int, ...]]] = [
        ("embd", (vocab, dim)),
        ("att_norm", (L, dim)),
        ("wq", (L, nh * hd, dim)),
        ("wk", (L, nkv * hd, dim)),
        ("wv", (L, nkv * hd, dim)),
        ("wo", (L, dim, nh * hd)),
        ("ffn_norm", (L, dim)),
        ("w1", (L, hidden, dim)),
        ("w2", (L, dim, hidden)),
        ("w3", (L, hidden, dim)),
        ("norm", (dim,)),
        ("cos", (seq, hd // 2)),
        ("sin", (seq, hd // 2)),
    ]
    if not shared:
        layout.append(("wcls", (vocab, dim)))
    arrays, off = {}, 0
    for name, shape in layout:
        n = int(np.prod(shape))
        if off + n > m.shape[0]:
            raise ConvertError(f"{path}: truncated llama2.c checkpoint at '{name}'")
        arrays[name] = m[off : off + n].reshape(shape)
        off += n
    names = {
        "input_layernorm": ("att_norm", 0),
        "self_attn.q_proj": ("wq", nh),
        "self_attn.k_proj": ("wk", nkv),
        "self_attn.v_proj": ("wv", 0),
        "self_attn.o_proj": ("wo", 0),
        "post_attention_layernorm": ("ffn_norm", 0),
        "mlp.gate_proj": ("w1", 0),
        "mlp.down_proj": ("w2", 0),
        "mlp.up_proj": ("w3", 0),
    }

    def get(hf: str, rows: slice) -> np.ndarray:
        if hf == "model.embed_tokens.weight":
            return np.array(arrays["embd"][rows])
        if hf == "lm_head.weight":
            return np.array(arrays["wcls"][rows])
        if hf == "model.norm.weight":
            return np.array(arrays["norm"])
        parts = hf.split(".")
        key, heads = names[".".join(parts[3:-1])]
        a = np.array(arrays[key][int(parts[2])])
        if heads:
            a = interleaved_to_hf(a, heads)
        return a if a.ndim == 1 else a[rows]

    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": dim,
        "intermediate_size": hidden,
        "num_hidden_layers": L,
        "num_attention_heads": nh,
        "num_key_value_heads": nkv,
        "head_dim": hd,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": seq,
        "tie_word_embeddings": shared,
        "vocab_size": vocab,
    }
    return cfg, get


def convert_llama2c(
    ckpt: str, tok_dir: str, out: str, qtype: str, q8: set[str], q4_rule: str
) -> None:
    if not os.path.isfile(ckpt):
        raise ConvertError(f"missing {ckpt}")
    tok_files = ctok.read_tokenizer_files(tok_dir)
    tj, tc = json.loads(tok_files["tokenizer.json"]), json.loads(tok_files["tokenizer_config.json"])
    cfg, get = llama2c_source(ckpt)
    c = LLAMA.normalize_config(cfg, {}, tj, tc)
    source = {
        "tool": PROG,
        "input": os.path.abspath(ckpt),
        "format": "llama2.c v0",
        "quant": qtype,
        "q4_rule": q4_rule,
        "q8": sorted(q8),
    }
    write_mlb(out, c, LLAMA.tensor_plan(c), get, tok_files, qtype, q8, q4_rule, source)


# ---------------------------------------------------------------- CLI


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--out", required=True, help="output .mlb file")
    p.add_argument(
        "--quant",
        choices=["f32", "f16", "q8_0", "q4_0"],
        default="q8_0",
        help="type of the weight matrices (default q8_0)",
    )
    p.add_argument(
        "--q8",
        default="embd,output",
        help="with --quant q4_0: matrix classes kept in q8_0 (comma list of "
        + ",".join(MATRIX_CLASSES)
        + "; default embd,output)",
    )
    p.add_argument(
        "--q4-rule",
        choices=["fit", "round"],
        default=None,
        help="Q4_0 scale rule: fit (search) or round (llama.cpp); default round for "
        "Gemma 3, fit otherwise (docs/quantization.md)",
    )
    p.add_argument(
        "--imatrix",
        help="importance matrix from ml_run --imatrix: weight the Q4_0 fits by each input "
        "channel's mean square (needs --q4-rule fit)",
    )


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "llama2c":
        p = argparse.ArgumentParser(
            prog=f"{PROG} llama2c", description="Convert a llama2.c checkpoint."
        )
        p.add_argument("ckpt", help="llama2.c version-0 .bin checkpoint")
        p.add_argument("tokdir", help="Hugging Face tokenizer directory (tokenizer.json)")
        _add_common(p)
        a = p.parse_args(argv[1:])
    else:
        p = argparse.ArgumentParser(
            prog=PROG,
            description=__doc__.split("\n")[0],
            epilog="Also: convert.py llama2c CKPT.bin TOKDIR -o OUT.mlb …",
        )
        p.add_argument("hf_dir", help="Hugging Face model directory")
        _add_common(p)
        a = p.parse_args(argv)
    # The output is written under a temporary name and renamed into place when complete
    # (mlb.MlbWriter): an existing file stays whole until then, and an error or Ctrl-C leaves
    # neither a partial file nor the temporary one.
    try:
        q8 = parse_q8(a.q8)
        if argv and argv[0] == "llama2c":
            if a.imatrix:
                raise ConvertError("--imatrix is for Hugging Face checkpoints")
            convert_llama2c(a.ckpt, a.tokdir, a.out, a.quant, q8, a.q4_rule or "fit")
        else:
            if a.imatrix and (a.quant != "q4_0" or a.q4_rule == "round"):
                raise ConvertError("--imatrix weights the Q4_0 'fit' rule: use --quant q4_0")
            convert_hf(a.hf_dir, a.out, a.quant, q8, a.q4_rule, a.imatrix)
    except (
        ConvertError,
        ctok.TokenizerError,
        st.SafetensorsError,
        OSError,
        json.JSONDecodeError,
    ) as e:
        mlb.die(PROG, str(e))


if __name__ == "__main__":
    main()
