#!/usr/bin/env python3
"""Perplexity of a text's tokens under the numpy reference forward (ref_forward.py), chunked and
scored the way docs/perplexity.md defines `ml_run --perplexity`; written from that description,
not from the C++ code, so the two can be compared.

Usage: tests/reference/ref_perplexity.py HF_DIR --tokens-file IDS.txt --ctx N [--scoring all|llama]
       [--chunks N] [--bos ID] [--f64] [--quantized-weights q8_0|q4_0 [--q4-rule fit|round]]

IDS.txt holds the whole text's token ids (as `ml_tok FILE encode - < text` prints them, BOS
first if the tokenizer adds one). Chunk i is ids[i*ctx, (i+1)*ctx) with its first id replaced by
--bos; the logits at position j predict id j+1 for j in [first, ctx-1), first = 0 (all) or
ctx/2 (llama). Prints the perplexity exp(mean NLL) and its standard error as one JSON object.
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np

import ref_forward

PROG = "ref_perplexity"


def chunk_nll(logits: np.ndarray, chunk: list[int], first: int) -> np.ndarray:
    """-log softmax(logits[j])[chunk[j+1]] for j in [first, len(chunk)-1), in float64."""
    x = logits[first : len(chunk) - 1].astype(np.float64)
    m = x.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(x - m).sum(axis=1))
    targets = np.array(chunk[first + 1 :])
    return lse - x[np.arange(len(targets)), targets]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("hf_dir")
    p.add_argument(
        "--tokens-file", required=True, help="the text's token ids, whitespace-separated"
    )
    p.add_argument("--ctx", type=int, required=True, help="tokens per chunk")
    p.add_argument("--scoring", choices=("all", "llama"), default="all")
    p.add_argument("--chunks", type=int, help="score at most this many chunks")
    p.add_argument("--bos", type=int, help="put this id at the start of every chunk")
    p.add_argument("--f64", action="store_true", help="run the forward in float64")
    p.add_argument("--quantized-weights", choices=("q8_0", "q4_0"))
    p.add_argument("--q4-rule", choices=("fit", "round"), default="fit")
    p.add_argument("--q8", default="embd,output", help="with q4_0: classes kept in q8_0")
    a = p.parse_args(argv)
    ids = [int(t) for t in open(a.tokens_file).read().split()]
    n = len(ids) // a.ctx
    if n < 2:
        p.error(f"{len(ids)} tokens: need at least two chunks of {a.ctx}")
    if a.chunks:
        n = min(n, a.chunks)
    first = a.ctx // 2 if a.scoring == "llama" else 0
    q8 = set(a.q8.split(",")) if a.quantized_weights == "q4_0" and a.q8 else None
    nll: list[np.ndarray] = []
    t0 = time.time()
    for c in range(n):
        chunk = ids[c * a.ctx : (c + 1) * a.ctx]
        if a.bos is not None:
            chunk[0] = a.bos
        logits = ref_forward.forward(
            a.hf_dir,
            chunk,
            np.float64 if a.f64 else np.float32,
            a.quantized_weights,
            q8,
            a.q4_rule if a.quantized_weights == "q4_0" else None,
        )
        nll.append(chunk_nll(logits, chunk, first))
        all_nll = np.concatenate(nll)
        print(
            f"\r{PROG}: chunk {c + 1}/{n}, ppl {math.exp(all_nll.mean()):.4f}, "
            f"{time.time() - t0:.0f} s",
            end="",
            file=sys.stderr,
        )
    print(file=sys.stderr)
    x = np.concatenate(nll)
    ppl = math.exp(x.mean())
    out = {
        "chunks": n,
        "n_ctx": a.ctx,
        "scoring": a.scoring,
        "predictions": int(len(x)),
        "mean_nll": float(x.mean()),
        "ppl": ppl,
        "ppl_stderr": ppl * math.sqrt(float(x.var()) / (len(x) - 1)),
    }
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
