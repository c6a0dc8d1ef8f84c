#!/usr/bin/python3
"""Krafla against llama.cpp on the same GGUF files: perplexity (llama-perplexity's scoring) and
speed (ml_bench vs llama-bench, side by side), for docs/gguf.md and docs/benchmarks.md.

    scripts/gguf_crosscheck.py --bin build/avx512vnni --llama-cpp /tmp/llama.cpp/build/bin \\
        [--text data/brown-test.txt] [--ctx 256] [--bench] FILE.gguf ...

llama.cpp is built under /tmp as docs/benchmarks.md says; nothing of it is in this repository.
Prints a Markdown table: file, size, PPL from both, their relative difference, and with --bench
prompt and generation tokens/s from both (2 threads, 3 repetitions) and their ratios.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd: list[str], stderr: bool = True) -> str:
    """stdout (and stderr, where llama.cpp logs its results) of cmd."""
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    err = subprocess.STDOUT if stderr else subprocess.DEVNULL
    r = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=err, text=True)
    return r.stdout


def ours_ppl(a: argparse.Namespace, f: str) -> float:
    out = run(
        [os.path.join(a.bin, "ml_run"), "-m", f, "-q", "--perplexity", a.text, "-c", str(a.ctx)]
        + ["--ppl-scoring", "llama", "--json", "-t", str(a.threads)]
        + (["--chunks", str(a.chunks)] if a.chunks else [])
    )
    return json.loads(out[out.index("{") :])["ppl"]


def theirs_ppl(a: argparse.Namespace, f: str) -> float:
    out = run(
        [os.path.join(a.llama_cpp, "llama-perplexity"), "-m", f, "-f", a.text, "-c", str(a.ctx)]
        + ["-t", str(a.threads)]
        + (["--chunks", str(a.chunks)] if a.chunks else [])
    )
    return float(re.search(r"Final estimate: PPL = ([0-9.]+)", out).group(1))


def ours_bench(a: argparse.Namespace, f: str) -> dict[str, float]:
    out = run(
        [os.path.join(a.bin, "ml_bench"), "-m", f, "-p", str(a.pp), "-n", str(a.tg), "-r", "3"]
        + ["-t", str(a.threads), "-o", "json"],
        stderr=False,
    )
    rows = json.loads(out[out.index("[") :])
    return {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in rows}


def theirs_bench(a: argparse.Namespace, f: str) -> dict[str, float]:
    out = run(
        [os.path.join(a.llama_cpp, "llama-bench"), "-m", f, "-p", str(a.pp), "-n", str(a.tg)]
        + ["-r", "3"]
        + ["-t", str(a.threads), "-o", "json"],
        stderr=False,
    )
    rows = json.loads(out[out.index("[") :])
    return {("pp" if r["n_prompt"] else "tg"): r["avg_ts"] for r in rows}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="build directory with ml_run and ml_bench")
    p.add_argument("--llama-cpp", required=True, help="llama.cpp's bin folder")
    p.add_argument("--text", default=os.path.join(ROOT, "data", "brown-test.txt"))
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--chunks", type=int, default=0, help="score only the first N chunks")
    p.add_argument("--bench", action="store_true", help="also prompt / generation speed")
    p.add_argument("--pp", type=int, default=512, help="prompt tokens of the speed test")
    p.add_argument("--tg", type=int, default=128, help="generated tokens of the speed test")
    p.add_argument("files", nargs="+")
    a = p.parse_args()
    head = "| file | MB | Krafla PPL | llama.cpp PPL | Δ |"
    if a.bench:
        pp, tg = f"pp{a.pp}", f"tg{a.tg}"
        head += f" Krafla {pp} | llama.cpp {pp} | ratio | Krafla {tg} | llama.cpp {tg} | ratio |"
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for f in a.files:
        ours, theirs = ours_ppl(a, f), theirs_ppl(a, f)
        line = (
            f"| {os.path.basename(f)} | {os.path.getsize(f) / 1e6:.1f} | {ours:.4f} | {theirs:.4f} "
            f"| {100 * (ours / theirs - 1):+.3f}% |"
        )
        if a.bench:
            o, t = ours_bench(a, f), theirs_bench(a, f)
            line += (
                f" {o['pp']:.0f} | {t['pp']:.0f} | {o['pp'] / t['pp']:.2f} "
                f"| {o['tg']:.0f} | {t['tg']:.0f} | {o['tg'] / t['tg']:.2f} |"
            )
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
