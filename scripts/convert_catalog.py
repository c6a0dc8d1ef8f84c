#!/usr/bin/env python3
"""Converts the models of Krafla's catalogue (scripts/models.json) from a local download
directory and writes a model card for each: file size, parameters, speed (ml_bench) and, when a
text is given, perplexity (ml_run --perplexity).

    scripts/convert_catalog.py --downloads ~/hf --out models-out --bin build/avx512vnni \
        [--only Qwen/Qwen3-0.6B ...] [--text data/brown-test.txt] [--quant q4_0] [-t 4]

A model is looked for in DOWNLOADS/REPO (huggingface-cli download REPO --local-dir
DOWNLOADS/REPO) or DOWNLOADS/ORG--NAME; a catalogue model not downloaded is listed and skipped.
Writes OUT/NAME-QUANT.mlb and OUT/NAME-QUANT.md; exits 2 when a conversion or a run fails.
Python with numpy only (as tools/convert.py).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = {"repo", "family", "chat", "quant", "since"}
QUANTS = {"f32", "f16", "q8_0", "q4_0"}
FAMILIES = {"llama", "mistral", "qwen2", "qwen3", "qwen3_5", "qwen3_moe", "qwen3_5_moe", "smollm3"}
FAMILIES |= {"gemma2", "gemma3"}


def fail(msg: str) -> None:
    raise SystemExit(f"convert_catalog: error: {msg}")


def load_catalog(path: str) -> list[dict]:
    """The catalogue's entries, each checked for its keys and values (errors name the entry)."""
    with open(path, encoding="utf-8") as f:
        models = json.load(f)["models"]
    for i, m in enumerate(models):
        where = f"{path}: models[{i}] ({m.get('repo', '?')})"
        if set(m) != KEYS:
            fail(f"{where}: keys {sorted(m)} are not {sorted(KEYS)}")
        if not re.fullmatch(r"[\w.-]+/[\w.-]+", m["repo"]):
            fail(f"{where}: repo must be ORG/NAME")
        if m["quant"] not in QUANTS:
            fail(f"{where}: quant {m['quant']!r} is not one of {sorted(QUANTS)}")
        if m["family"] not in FAMILIES:
            fail(f"{where}: family {m['family']!r} is not one of {sorted(FAMILIES)}")
        if not re.fullmatch(r"\d+\.\d+\.\d+", m["since"]):
            fail(f"{where}: since {m['since']!r} is not a version X.Y.Z")
    return models


def chat_templates(ml_run: str) -> set[str]:
    """The template names ml_run --help lists for --chat."""
    out = run([ml_run, "--help"])
    m = re.search(r"chat with a template: auto \(.*?\), ([^\n]+)", out)
    if not m:
        fail("ml_run --help lists no chat templates")
    return {t.strip() for t in m.group(1).split(",")}


def run(cmd: list[str], stderr: bool = False) -> str:
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        fail(f"{' '.join(cmd)} exited with {p.returncode}:\n{p.stderr[-2000:]}")
    return p.stdout + (p.stderr if stderr else "")


def local_dir(downloads: str, repo: str) -> str | None:
    for d in (os.path.join(downloads, repo), os.path.join(downloads, repo.replace("/", "--"))):
        if os.path.isfile(os.path.join(d, "config.json")):
            return d
    return None


def measure(bin_dir: str, mlb: str, threads: int, text: str | None, max_ctx: int) -> dict:
    """ml_bench pp128/tg32 (tokens/s) and, with a text, the perplexity at a 256-token context."""
    rows = json.loads(
        run(
            [os.path.join(bin_dir, "ml_bench"), "-m", mlb, "-p", "128", "-n", "32", "-r", "2"]
            + ["-t", str(threads), "-o", "json"]
        )
    )
    card = {
        "params": rows[0]["model_n_params"],
        "isa": rows[0]["isa"],
        "threads": threads,
        "pp128": rows[0]["avg_ts"],
        "tg32": rows[1]["avg_ts"],
    }
    if text:
        ctx = min(256, max_ctx)
        out = run(
            [os.path.join(bin_dir, "ml_run"), "-m", mlb, "--perplexity", text, "-c", str(ctx)]
            + ["-t", str(threads)],
            stderr=True,
        )
        m = re.search(r"Final estimate: PPL = ([0-9.]+) \+/- ([0-9.]+)", out)
        if not m:
            fail(f"no perplexity in ml_run's output for {mlb}")
        card.update(
            ppl=float(m.group(1)),
            ppl_err=float(m.group(2)),
            ppl_ctx=ctx,
            ppl_text=os.path.basename(text),
        )
    return card


def write_card(path: str, m: dict, mlb: str, card: dict) -> None:
    name = os.path.basename(mlb)
    size = os.path.getsize(mlb) / 2**20
    lines = [
        f"# {m['repo']} ({m['quant'].upper()})",
        "",
        f"Converted by Krafla's catalogue (scripts/models.json; runs since Krafla {m['since']}).",
        "",
        "| | |",
        "|---|---|",
        f"| file | `{name}`, {size:.1f} MiB |",
        f"| family | {m['family']} |",
        f"| parameters | {card['params'] / 1e6:.1f} M |",
        f"| chat template | `{m['chat']}` |",
        f"| prefill (pp128) | {card['pp128']:.1f} tokens/s "
        f"({card['isa']}, {card['threads']} threads) |",
        f"| decode (tg32) | {card['tg32']:.1f} tokens/s |",
    ]
    if "ppl" in card:
        lines.append(
            f"| perplexity | {card['ppl']:.3f} ± {card['ppl_err']:.3f} "
            f"({card['ppl_text']}, {card['ppl_ctx']}-token context) |"
        )
    lines += [
        "",
        "```sh",
        f"ml_run -m {name} --chat {m['chat']}",
        f"ml_server -m {name}",
        "```",
        "",
    ]
    with open(path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--catalog", default=os.path.join(ROOT, "scripts", "models.json"))
    ap.add_argument("--downloads", required=True, help="directory of Hugging Face downloads")
    ap.add_argument("--out", required=True, help="directory for the .mlb files and cards")
    ap.add_argument(
        "--bin",
        default=os.path.join(ROOT, "build", "avx512vnni"),
        help="build directory with ml_run and ml_bench",
    )
    ap.add_argument("--only", nargs="*", default=[], help="these repos only")
    ap.add_argument("--text", help="a text for the perplexity (e.g. data/brown-test.txt)")
    ap.add_argument("--quant", help="override every model's recommended quant")
    ap.add_argument("-t", "--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--check", action="store_true", help="only validate the catalogue")
    a = ap.parse_args()

    models = load_catalog(a.catalog)
    known = chat_templates(os.path.join(a.bin, "ml_run"))
    for m in models:
        if m["chat"] not in known:
            fail(f"{m['repo']}: chat template {m['chat']!r} is not one of ml_run's {sorted(known)}")
    unknown = set(a.only) - {m["repo"] for m in models}
    if unknown:
        fail(f"not in the catalogue: {', '.join(sorted(unknown))}")
    if a.check:
        print(f"convert_catalog: {len(models)} models, all valid")
        return
    os.makedirs(a.out, exist_ok=True)
    done, missing = [], []
    for m in models:
        if a.only and m["repo"] not in a.only:
            continue
        src = local_dir(a.downloads, m["repo"])
        if not src:
            missing.append(m["repo"])
            continue
        quant = a.quant or m["quant"]
        m = {**m, "quant": quant}
        stem = f"{m['repo'].split('/')[1].lower()}-{quant}"
        mlb = os.path.join(a.out, stem + ".mlb")
        print(f"convert_catalog: {m['repo']} → {mlb}", file=sys.stderr)
        run(
            [
                sys.executable,
                os.path.join(ROOT, "tools", "convert.py"),
                src,
                "--quant",
                quant,
                "-o",
                mlb,
            ]
        )
        with open(os.path.join(src, "config.json"), encoding="utf-8") as f:
            max_ctx = int(json.load(f).get("max_position_embeddings", 2048))
        card = measure(a.bin, mlb, a.threads, a.text, max_ctx)
        write_card(os.path.join(a.out, stem + ".md"), m, mlb, card)
        done.append(m["repo"])
    print(f"convert_catalog: converted {len(done)}: {', '.join(done) or '-'}")
    if missing:
        print(f"convert_catalog: not downloaded (skipped): {', '.join(missing)}")


if __name__ == "__main__":
    main()
