#!/usr/bin/python3
"""The quality table of docs/quantization.md: perplexity and KL divergence of the trained model
(models/brown-llama) on the held-out Brown text, for each weight type, Q4_0 rule, the importance
matrix, a mixed scheme and the KV cache types, measured with this build's ml_run.

    scripts/quality_table.py --bin build/avx512vnni [--out docs/quality.json] [--png FILE]

Writes the .mlb files and the KL base under --work (default .models/quality), prints a Markdown
table and writes the numbers as JSON; with --png (needs python3-matplotlib) a bar chart.
The importance matrix is computed on the start of brown-train.txt (the training text, never the
held-out one).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def run(cmd: list[str], **kw) -> str:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw).stdout


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--bin", required=True, help="build directory with ml_run")
    p.add_argument("--model", default=os.path.join(ROOT, "models", "brown-llama"))
    p.add_argument("--text", default=os.path.join(ROOT, "data", "brown-test.txt"))
    p.add_argument(
        "--imatrix-text",
        default=os.path.join(ROOT, "..", "shared", "data", "text", "brown-train.txt"),
        help="text the importance matrix is computed on (its first --imatrix-chars)",
    )
    p.add_argument("--imatrix-chars", type=int, default=400_000)
    p.add_argument("--ctx", type=int, default=256)
    p.add_argument("--kl-chunks", type=int, default=40, help="chunks the KL figures cover")
    p.add_argument("--work", default=os.path.join(ROOT, ".models", "quality"))
    p.add_argument("--out", help="write the numbers as JSON here")
    p.add_argument("--png", help="write a bar chart here")
    a = p.parse_args()
    os.makedirs(a.work, exist_ok=True)
    ml_run = os.path.join(a.bin, "ml_run")

    def convert(name: str, *args: str) -> str:
        out = os.path.join(a.work, f"{name}.mlb")
        if not os.path.exists(out):
            run([PY, os.path.join(ROOT, "tools", "convert.py"), a.model, "-o", out, *args])
        return out

    imat = os.path.join(a.work, "brown-train.imatrix")
    if not os.path.exists(imat):
        part = os.path.join(a.work, "imatrix-text.txt")
        with open(a.imatrix_text, encoding="utf-8") as f, open(part, "w") as g:
            g.write(f.read(a.imatrix_chars))
        f32 = convert("f32", "--quant", "f32")
        run([ml_run, "-m", f32, "-q", "--perplexity", part, "-c", str(a.ctx), "--imatrix", imat])
    rows = [
        ("F32", convert("f32", "--quant", "f32"), []),
        ("F16", convert("f16", "--quant", "f16"), []),
        ("Q8_0", convert("q8_0", "--quant", "q8_0"), []),
        ("Q4_0 round", convert("q4_0-round", "--quant", "q4_0", "--q4-rule", "round"), []),
        ("Q4_0 fit", convert("q4_0-fit", "--quant", "q4_0", "--q4-rule", "fit"), []),
        (
            "Q4_0 fit + imatrix",
            convert("q4_0-imatrix", "--quant", "q4_0", "--q4-rule", "fit", "--imatrix", imat),
            [],
        ),
        (
            "Q4_0 fit, q8: v,o,down",
            convert("q4_0-mixed", "--quant", "q4_0", "--q8", "embd,output,v,o,down"),
            [],
        ),
        (
            "Q4_0 round, all Q4",
            convert("q4_0-all", "--quant", "q4_0", "--q8", "", "--q4-rule", "round"),
            [],
        ),
        ("F32, --kv f16", convert("f32", "--quant", "f32"), ["--kv", "f16"]),
        ("F32, --kv q8_0", convert("f32", "--quant", "f32"), ["--kv", "q8_0"]),
        ("Q8_0, --kv q8_0", convert("q8_0", "--quant", "q8_0"), ["--kv", "q8_0"]),
    ]
    base = os.path.join(a.work, "f32.kld")
    common = ["-q", "--perplexity", a.text, "-c", str(a.ctx), "--json"]
    klargs = ["--ppl-scoring", "llama", "--chunks", str(a.kl_chunks), "--kl-divergence-base", base]
    if not os.path.exists(base):
        run([ml_run, "-m", rows[0][1], *common, *klargs])
    table = []
    for label, path, extra in rows:
        ppl = json.loads(run([ml_run, "-m", path, *common, *extra]))
        llama = json.loads(run([ml_run, "-m", path, *common, "--ppl-scoring", "llama", *extra]))
        kl = json.loads(run([ml_run, "-m", path, *common, *klargs, "--kl-divergence", *extra]))
        table.append(
            {
                "config": label,
                "file_mb": os.path.getsize(path) / 1e6,
                "ppl": ppl["ppl"],
                "ppl_stderr": ppl["ppl_stderr"],
                "ppl_llama": llama["ppl"],
                "kl_mean": kl["kl"]["mean"],
                "kl_p99": kl["kl"]["p99"],
                "top1": kl["kl"]["top1_agreement"],
            }
        )
        print(label, table[-1], file=sys.stderr)
    print(
        f"| config | file MB | PPL (all, ctx {a.ctx}) | PPL (llama-perplexity scoring) "
        f"| KL mean | KL 99% | same top-1 |"
    )
    print("|---|---|---|---|---|---|---|")
    for r in table:
        print(
            f"| {r['config']} | {r['file_mb']:.1f} | {r['ppl']:.3f} ± {r['ppl_stderr']:.3f} "
            f"| {r['ppl_llama']:.3f} | {r['kl_mean']:.5f} | {r['kl_p99']:.4f} "
            f"| {100 * r['top1']:.2f}% |"
        )
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"ctx": a.ctx, "kl_chunks": a.kl_chunks, "rows": table}, f, indent=2)
    if a.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
        labels = [r["config"] for r in table]
        ax1.barh(labels, [r["ppl"] for r in table], color="#4a7ab5")
        ax1.set_xlim(min(r["ppl"] for r in table) * 0.98, max(r["ppl"] for r in table) * 1.01)
        ax1.set_xlabel(f"perplexity on brown-test (ctx {a.ctx}, lower is better)")
        ax1.invert_yaxis()
        ax2.barh(labels, [r["kl_mean"] for r in table], color="#c0504d")
        ax2.set_xlabel("mean KL divergence to F32 (nats)")
        ax2.set_yticklabels([])
        ax2.invert_yaxis()
        fig.suptitle("Krafla on the trained 11M Llama (models/brown-llama)")
        fig.tight_layout()
        fig.savefig(a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
