"""Convert a Hugging Face checkpoint (or a llama2.c one) to .mlb.

Families: Llama/Mistral/Qwen2/Qwen3/SmolLM2/SmolLM3 (families/llama.py), Gemma 2/3
(families/gemma.py), Qwen3.5 (families/qwen35.py): families/base.py's Family subclasses, in
families.FAMILIES.

Usage (tools/convert.py, or `python3 -m convert` in tools/):
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
import sys

from . import mlb
from . import safetensors_io as st
from . import tokenizer as ctok
from .hf import convert_hf
from .hf_config import ConvertError
from .llama2c import convert_llama2c
from .writer import MATRIX_CLASSES, PROG, parse_q8


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
