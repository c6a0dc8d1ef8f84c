#!/usr/bin/python3
"""The quality table of docs/quantization.md: perplexity and KL divergence of the trained model
(models/brown-llama) on the held-out Brown text, for each weight type, Q4_0 rule, the importance
matrix, a mixed scheme and the KV cache types, measured with this build's ml_run.

    scripts/quality_table.py --bin build/avx512vnni [--out docs/quality.json] [--png FILE]
                             [--llama-cpp /tmp/llama.cpp/build/bin]

Writes the .mlb files and the KL base under --work (default .models/quality), prints a Markdown
table and writes the numbers as JSON; with --png (needs python3-matplotlib) a bar chart.
The importance matrix is computed on the start of brown-train.txt (the training text, never the
held-out one). With --llama-cpp (a llama.cpp build's bin folder, built as docs/benchmarks.md
says; nothing of it is in this repository) each row's .mlb is also written as a GGUF of the same
weights (tools/to_gguf.py) and scored by llama-perplexity (its KV flags for the KV rows).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PY = "/usr/bin/python3"


def run(cmd: list[str], stderr: bool = False) -> str:
    """stdout of cmd; with stderr, stdout and stderr together (llama.cpp logs its results on
    both)."""
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    err = subprocess.STDOUT if stderr else subprocess.PIPE
    return subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=err, text=True).stdout


def gguf_of(path: str) -> str:
    """The GGUF of a .mlb (tools/to_gguf.py), written beside it once."""
    gguf = os.path.splitext(path)[0] + ".gguf"
    if not os.path.exists(gguf):
        run([PY, os.path.join(ROOT, "tools", "to_gguf.py"), path, "-o", gguf])
    return gguf


def number(pattern: str, text: str) -> float:
    m = re.search(pattern, text)
    if not m:
        raise SystemExit(f"quality_table.py: no match for {pattern!r} in llama.cpp's output")
    return float(m.group(1))


# llama-perplexity's KV flags for ml_run's --kv (a quantized V cache needs flash attention)
LLAMA_KV = {"f16": ["-ctk", "f16", "-ctv", "f16"], "q8_0": ["-ctk", "q8_0", "-ctv", "q8_0"]}


def llama_cpp_row(a: argparse.Namespace, path: str, extra: list[str], base: str) -> dict:
    """llama-perplexity's PPL, KL mean / 99% and same top-1 on a GGUF of path's weights."""
    tool = os.path.join(a.llama_cpp, "llama-perplexity")
    kv = LLAMA_KV[extra[1]] if extra else []
    common = [tool, "-m", gguf_of(path), "-f", a.text, "-c", str(a.ctx), "-t", "2", "-fa", "on"]
    out = run([*common, *kv], stderr=True)
    kl = run(
        [*common, *kv, "--chunks", str(a.kl_chunks), "--kl-divergence-base", base]
        + ["--kl-divergence"],
        stderr=True,
    )
    return {
        "ppl_llama_cpp": number(r"Final estimate: PPL = ([0-9.]+)", out),
        "kl_mean_llama_cpp": number(r"Mean\s+KLD:\s+(-?[0-9.]+)", kl),
        "kl_p99_llama_cpp": number(r"99\.0%\s+KLD:\s+(-?[0-9.]+)", kl),
        "top1_llama_cpp": number(r"Same top p:\s+([0-9.]+)", kl) / 100,
    }


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
    p.add_argument("--llama-cpp", help="a llama.cpp build's bin folder: add its column")
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
    llama_base = os.path.join(a.work, "f32.llama.kld")
    if a.llama_cpp and not os.path.exists(llama_base):
        tool = os.path.join(a.llama_cpp, "llama-perplexity")
        f32 = gguf_of(rows[0][1])
        run(
            [tool, "-m", f32, "-f", a.text, "-c", str(a.ctx), "-t", "2", "--chunks"]
            + [str(a.kl_chunks), "--kl-divergence-base", llama_base],
            stderr=True,
        )
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
        if a.llama_cpp:
            table[-1].update(llama_cpp_row(a, path, extra, llama_base))
        print(label, table[-1], file=sys.stderr)
    lc = bool(a.llama_cpp)
    print(
        f"| config | file MB | PPL (all, ctx {a.ctx}) | PPL (llama-perplexity scoring) "
        f"| KL mean | KL 99% | same top-1 |"
        + (" llama.cpp PPL | llama.cpp KL mean | KL 99% | same top-1 |" if lc else "")
    )
    print("|---" * (11 if lc else 7) + "|")
    for r in table:
        line = (
            f"| {r['config']} | {r['file_mb']:.1f} | {r['ppl']:.3f} ± {r['ppl_stderr']:.3f} "
            f"| {r['ppl_llama']:.3f} | {r['kl_mean']:.5f} | {r['kl_p99']:.4f} "
            f"| {100 * r['top1']:.2f}% |"
        )
        if lc:
            line += (
                f" {r['ppl_llama_cpp']:.3f} | {r['kl_mean_llama_cpp']:.5f} "
                f"| {r['kl_p99_llama_cpp']:.4f} | {100 * r['top1_llama_cpp']:.2f}% |"
            )
        print(line)
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"ctx": a.ctx, "kl_chunks": a.kl_chunks, "rows": table}, f, indent=2)
    if a.png:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2), dpi=110)
        labels = [r["config"] for r in table]
        y = list(range(len(table)))
        h = 0.4 if lc else 0.8
        ours = [r["ppl_llama"] for r in table]
        ax1.barh([i - h / 2 if lc else i for i in y], ours, h, color="#4a7ab5", label="Krafla")
        vals = ours
        if lc:
            theirs = [r["ppl_llama_cpp"] for r in table]
            ax1.barh([i + h / 2 for i in y], theirs, h, color="#9bbb59", label="llama.cpp")
            vals = ours + theirs
            ax1.legend(loc="lower right")
        ax1.set_yticks(y, labels)
        ax1.set_xlim(min(vals) * 0.98, max(vals) * 1.01)
        ax1.set_xlabel(f"perplexity, llama-perplexity scoring (ctx {a.ctx}, lower is better)")
        ax1.invert_yaxis()
        kl = [r["kl_mean"] for r in table]
        ax2.barh([i - h / 2 if lc else i for i in y], kl, h, color="#c0504d", label="Krafla")
        if lc:
            klc = [r["kl_mean_llama_cpp"] for r in table]
            ax2.barh([i + h / 2 for i in y], klc, h, color="#f79646", label="llama.cpp")
            ax2.legend(loc="lower right")
        ax2.set_yticks(y)
        ax2.set_xlabel("mean KL divergence to F32 (nats)")
        ax2.set_yticklabels([])
        ax2.invert_yaxis()
        fig.suptitle("Krafla on the trained 11M Llama (models/brown-llama)")
        fig.tight_layout()
        fig.savefig(a.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
