#!/usr/bin/env python3
"""Compare two logits files ([n_tokens, vocab] .npy): reference vs test.

Usage: tests/e2e/compare.py REF.npy TEST.npy [--max-abs X] [--max-rel X] [--max-kl X]
       [--mean-kl X] [--min-top1 F] [--positions a:b]

Prints max|Δ|, max relative error (per position max|Δ| / max|ref|, the worst position),
mean and max KL(ref||test) over positions (natural log, softmax of each row) and top-1
agreement (fraction of positions whose argmax matches). Exits 1 when a given threshold is
not met, or when shapes differ or the test holds NaN/Inf; 2 on unreadable input.
"""
from __future__ import annotations

import argparse
import sys

import numpy as np


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def metrics(ref: np.ndarray, test: np.ndarray) -> dict[str, float]:
    ref, test = np.atleast_2d(ref).astype(np.float64), np.atleast_2d(test).astype(np.float64)
    diff = np.abs(ref - test)
    per_pos_rel = diff.max(axis=1) / np.maximum(np.abs(ref).max(axis=1), 1e-30)
    lr, lt = log_softmax(ref), log_softmax(test)
    kl = (np.exp(lr) * (lr - lt)).sum(axis=1)
    return {
        "max_abs": float(diff.max()),
        "max_rel": float(per_pos_rel.max()),
        "mean_kl": float(kl.mean()),
        "max_kl": float(kl.max()),
        "top1": float((ref.argmax(1) == test.argmax(1)).mean()),
        "n": ref.shape[0],
    }


def check(m: dict[str, float], a: argparse.Namespace) -> list[str]:
    fails = []
    for key, lim in (
        ("max_abs", a.max_abs),
        ("max_rel", a.max_rel),
        ("max_kl", a.max_kl),
        ("mean_kl", a.mean_kl),
    ):
        if lim is not None and not m[key] <= lim:
            fails.append(f"{key} {m[key]:.6g} > {lim:g}")
    if a.min_top1 is not None and not m["top1"] >= a.min_top1:
        fails.append(f"top1 {m['top1']:.4f} < {a.min_top1:g}")
    return fails


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="compare.py", description=__doc__.split("\n")[0])
    p.add_argument("ref")
    p.add_argument("test")
    p.add_argument("--max-abs", type=float)
    p.add_argument("--max-rel", type=float)
    p.add_argument("--max-kl", type=float)
    p.add_argument("--mean-kl", type=float)
    p.add_argument("--min-top1", type=float, help="minimum fraction of matching argmax")
    p.add_argument("--positions", help="only rows a:b (python slice)")
    a = p.parse_args(argv)
    try:
        ref, test = np.load(a.ref), np.load(a.test)
    except (OSError, ValueError) as e:
        print(f"compare.py: error: {e}", file=sys.stderr)
        return 2
    if a.positions:
        lo, _, hi = a.positions.partition(":")
        sl = slice(int(lo) if lo else None, int(hi) if hi else None)
        ref, test = np.atleast_2d(ref)[sl], np.atleast_2d(test)[sl]
    if ref.shape != test.shape:
        print(f"compare.py: FAIL: shapes differ: ref {list(ref.shape)} test {list(test.shape)}")
        return 1
    if not np.isfinite(test).all():
        print("compare.py: FAIL: test logits contain NaN or Inf")
        return 1
    m = metrics(ref, test)
    print(
        f"positions {m['n']}  max|d| {m['max_abs']:.6g}  max rel {m['max_rel']:.6g}  "
        f"KL mean {m['mean_kl']:.6g} max {m['max_kl']:.6g}  top1 {m['top1']:.4f}"
    )
    fails = check(m, a)
    if fails:
        print("compare.py: FAIL: " + "; ".join(fails))
        return 1
    print("compare.py: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
