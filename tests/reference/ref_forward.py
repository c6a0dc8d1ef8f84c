#!/usr/bin/env python3
"""Reference (oracle) forward pass of Llama/Mistral/Qwen2/Qwen3/SmolLM3 causal LMs in numpy
(Gemma 2/3: ref_gemma.py; Gemma 4: ref_gemma4.py; Qwen3.5: ref_qwen35.py; Qwen3-MoE and
Qwen3.5-MoE: ref_moe.py).

Usage: PYTHONPATH=tools tests/reference/ref_forward.py HF_DIR --tokens 1,2,3 [--out logits.npy]
       [--f64] [--quantized-weights f16|q8_0|q4_0 [--q8 CLASSES] [--q4-rule fit|round]
       [--act-quant]]

The dispatcher of the numpy references (tests/reference/ref_<arch>.py, one per architecture):
written from the transformers modeling equations, reading the HF directory directly
(config.json + safetensors), never the .mlb and never the converter's code (only its
safetensors reader and, for --quantized-weights, its quantizers, from tools/convert on
PYTHONPATH): it is what the C++ runtime is compared against.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

import ref_gemma
import ref_gemma4
import ref_llama
import ref_moe
import ref_qwen35
from convert import safetensors_io as st
from ref_common import Options, load_config

PROG = "ref_forward.py"


def forward(
    d: str,
    tokens: list[int],
    dt: type = np.float32,
    qtype: str | None = None,
    q8: set[str] | None = None,
    q4_rule: str | None = None,
    act_quant: bool = False,
) -> np.ndarray:
    cfg = load_config(d)
    opt = Options(dt, qtype, q8, q4_rule, act_quant)
    if act_quant and cfg.get("model_type") in ref_gemma.MODEL_TYPES + ref_gemma4.MODEL_TYPES:
        raise ValueError("--act-quant is not implemented for the Gemma references")
    if cfg.get("model_type") in ref_gemma.MODEL_TYPES:
        return ref_gemma.forward(d, tokens, opt)
    if cfg.get("model_type") in ref_gemma4.MODEL_TYPES:
        return ref_gemma4.forward(d, tokens, opt)
    if cfg.get("model_type") in ref_qwen35.MODEL_TYPES:
        return ref_qwen35.forward(d, tokens, opt)
    if cfg.get("model_type") in ref_moe.MODEL_TYPES:
        return ref_moe.forward(d, tokens, opt)
    return ref_llama.forward(d, tokens, opt)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("hf_dir")
    p.add_argument("--tokens", required=True, help="comma-separated token ids")
    p.add_argument("--out", help="write logits [n_tokens, vocab] float32 .npy")
    p.add_argument("--f64", action="store_true", help="compute in float64")
    p.add_argument(
        "--quantized-weights",
        choices=["f16", "q8_0", "q4_0"],
        help="round-trip the weight matrices through this type first",
    )
    p.add_argument("--q8", default="embd,output", help="with q4_0: classes kept in q8_0")
    p.add_argument(
        "--q4-rule",
        choices=["fit", "round"],
        default=None,
        help="default: convert.py's (round for Gemma 3, fit otherwise)",
    )
    p.add_argument(
        "--act-quant",
        action="store_true",
        help="with --quantized-weights q8_0/q4_0: also round the inputs of quantized "
        "matmuls to 8 bits per block of 32, as the runtime's dot products do "
        "(Qwen3.5 only)",
    )
    p.add_argument("--top", type=int, default=5, help="top tokens to print per position")
    a = p.parse_args(argv)
    try:
        tokens = [int(t) for t in a.tokens.split(",") if t.strip()]
        q8 = {c.strip() for c in a.q8.split(",") if c.strip()}
        logits = forward(
            a.hf_dir,
            tokens,
            np.float64 if a.f64 else np.float32,
            a.quantized_weights,
            q8,
            a.q4_rule,
            a.act_quant,
        )
    except (OSError, ValueError, KeyError, st.SafetensorsError) as e:
        print(f"{PROG}: error: {e}", file=sys.stderr)
        sys.exit(2)
    print(f"logits shape {list(logits.shape)}")
    for i, row in enumerate(logits):
        top = np.argsort(-row)[: a.top]
        print(f"pos {i} token {tokens[i]}: " + " ".join(f"{t}:{row[t]:.3f}" for t in top))
    if a.out:
        np.save(a.out, logits)


if __name__ == "__main__":
    main()
