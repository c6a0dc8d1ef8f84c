#!/usr/bin/python3
"""Bit-identity guard for behaviour-preserving changes: dump every position's logits of every
e2e model file (BUILD/e2e/*.mlb, made by `ctest -R e2e.setup`, and any *.gguf beside them, e.g.
written by tools/to_gguf.py) before a refactor, and compare after it, bit for bit.

  scripts/logits_snapshot.py dump    --bin build/avx512vnni --out /tmp/logits-before
  scripts/logits_snapshot.py compare --bin build/avx512vnni --out /tmp/logits-before

Each model runs its e2e prompt (40 tokens; 600 for qwen35-long) with --batch 128 and with
--batch 7 (prefill in uneven steps), so both the batched and the chunked paths are covered.
"""
from __future__ import annotations

import argparse
import glob
import os
import subprocess
import sys

import numpy as np

VARIANTS = {"b128": ["--batch", "128"], "b7": ["--batch", "7", "-t", "1"]}


def prompt(path: str) -> str:
    # The ids only need to be the same at dump and compare time; stay inside every vocabulary.
    n = 600 if "qwen35-long" in os.path.basename(path) else 40
    rng = np.random.default_rng(7)
    return ",".join(str(int(x)) for x in rng.integers(0, 4096, n))


def run(bin_dir: str, path: str, variant: str, out: str) -> None:
    cmd = [
        os.path.join(bin_dir, "ml_run"),
        "-m",
        path,
        "-q",
        "--tokens",
        prompt(path),
        "--logits",
        out,
    ] + VARIANTS[variant]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAILED: {' '.join(cmd[:4])}: {r.stderr.strip()}")


def main() -> None:
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("mode", choices=["dump", "compare"])
    p.add_argument("--bin", required=True, help="build directory with ml_run and e2e/*.mlb")
    p.add_argument("--out", required=True, help="directory of the snapshot")
    p.add_argument("--models", help="directory of the .mlb/.gguf files (default BIN/e2e)")
    a = p.parse_args()
    where = a.models or os.path.join(a.bin, "e2e")
    models = sorted(
        glob.glob(os.path.join(where, "*.mlb")) + glob.glob(os.path.join(where, "*.gguf"))
    )
    if not models:
        sys.exit(f"no model files in {a.bin}/e2e: run `ctest --test-dir {a.bin} -R e2e.setup`")
    os.makedirs(a.out, exist_ok=True)
    differ = []
    for path in models:
        for v in VARIANTS:
            name = f"{os.path.basename(path)}.{v}.npy"
            if a.mode == "dump":
                run(a.bin, path, v, os.path.join(a.out, name))
                continue
            new = os.path.join(a.out, "new-" + name)
            run(a.bin, path, v, new)
            before, after = np.load(os.path.join(a.out, name)), np.load(new)
            same = before.shape == after.shape and before.tobytes() == after.tobytes()
            print(f"{'same' if same else 'DIFFERENT'}: {name}", flush=True)
            if not same:
                differ.append(name)
    if a.mode == "dump":
        print(f"dumped {len(models) * len(VARIANTS)} logits files to {a.out}")
    elif differ:
        sys.exit(f"{len(differ)} of {len(models) * len(VARIANTS)} differ: {', '.join(differ)}")
    else:
        print(f"all {len(models) * len(VARIANTS)} logits files are bit-identical")


if __name__ == "__main__":
    main()
