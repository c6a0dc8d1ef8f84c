#!/usr/bin/env python3
"""Speculative decoding, side by side: plain decoding, prompt lookup and a draft model in
Krafla's ml_run, and (optionally) the same in llama.cpp's llama-bench / llama-lookup /
llama-speculative-simple, on two prompts: a summarisation-like one (a passage, then the cue to
say it again, so the reply repeats the context) and a free-writing one.

    scripts/bench_spec.py --ml-run build/avx512vnni/ml_run -m TARGET.mlb --draft DRAFT.mlb \\
        [--llama-bin /tmp/llama.cpp/build/bin --gguf TARGET.gguf --gguf-draft DRAFT.gguf] \\
        [-t 1] [-n 120] [--rounds 2] [--json-out FILE]

Every run is greedy (temperature 0), so each program prints the same text with and without
speculation and the speed is the only difference. Krafla's rows give the generated tokens per
second ml_run reports and, for the speculative ones, the drafted tokens kept per pass with a
draft (1 + accepted / passes); llama.cpp's plain row is llama-bench's decode at the prompt's
depth (-p 0 -n N -d PROMPT), its speculative rows the "decoded … speed" line and
n_accept / n_drafted. Runs alternate between the two programs per round; the median of the
rounds is printed. Stdlib only; run with /usr/bin/python3.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys

PROG = "bench_spec"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TEXT = os.path.join(ROOT, "..", "shared", "data", "text", "brown-test.txt")


def prompts() -> dict[str, str]:
    """The summarisation-like prompt (the held-out Brown text's first paragraph, then a cue to
    repeat it) and the free-writing one."""
    with open(TEXT, encoding="utf-8") as f:
        para = f.read().split("\n\n")[1].strip()
    return {
        "summarise": f"{para}\n\nIn short: behind this reply, and its many variations, is",
        "free": "The history of the county was written by",
    }


def run(cmd: list[str]) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    if p.returncode != 0:
        sys.exit(f"{PROG}: {' '.join(cmd[:3])}…: exit {p.returncode}\n{p.stderr[-2000:]}")
    return p


def krafla(a: argparse.Namespace, prompt: str, mode: str) -> dict:
    cmd = [a.ml_run, "-m", a.model, "-p", prompt, "-n", str(a.n), "-t", str(a.threads)]
    cmd += ["--temp", "0", "-c", str(a.ctx), "-q", "--no-display-prompt"]
    if mode == "lookup":
        cmd += ["--lookup", str(a.draft_max)]
    elif mode == "draft":
        cmd += ["--draft", a.draft, "--draft-max", str(a.draft_max)]
        cmd += ["--draft-p-min", str(a.draft_p_min)]
    err = run(cmd).stderr
    m = re.search(r"generated: (\d+) tokens in [0-9.]+ s \(([0-9.]+) tok/s\)", err)
    out = {"tok_s": float(m.group(2)), "tokens": int(m.group(1))}
    m = re.search(r"(\d+) of (\d+) drafted tokens accepted in (\d+) passes", err)
    if m:
        acc, drafted, passes = (int(x) for x in m.groups())
        out.update(accepted=acc, drafted=drafted, per_pass=1 + acc / max(passes, 1))
    return out


def n_tokens(a: argparse.Namespace, prompt: str) -> int:
    ml_tok = os.path.join(os.path.dirname(a.ml_run), "ml_tok")
    r = subprocess.run(
        [ml_tok, a.model, "encode", "-"], input=prompt, capture_output=True, text=True, check=True
    )
    return len(r.stdout.replace(",", " ").split()) + 1  # + BOS


def llama(a: argparse.Namespace, prompt: str, mode: str) -> dict:
    b = a.llama_bin
    common = ["-t", str(a.threads), "-c", str(a.ctx), "-n", str(a.n), "--temp", "0"]
    if mode == "plain":
        depth = n_tokens(a, prompt)
        cmd = [
            os.path.join(b, "llama-bench"),
            "-m",
            a.gguf,
            "-t",
            str(a.threads),
            "-p",
            "0",
            "-n",
            str(a.n),
            "-d",
            str(depth),
            "-r",
            "3",
            "-o",
            "json",
        ]
        rows = json.loads(run(cmd).stdout)
        return {"tok_s": statistics.median(rows[0]["samples_ts"])}
    if mode == "lookup":
        cmd = [
            os.path.join(b, "llama-lookup"),
            "-m",
            a.gguf,
            "-p",
            prompt,
            *common,
            "--spec-draft-n-max",
            str(a.draft_max),
        ]
    else:
        cmd = [
            os.path.join(b, "llama-speculative-simple"),
            "-m",
            a.gguf,
            "-md",
            a.gguf_draft,
            "-p",
            prompt,
            *common,
            "--spec-draft-n-max",
            str(a.draft_max),
            "--spec-draft-n-min",
            "0",
            "--spec-draft-p-min",
            str(a.draft_p_min),
            "--spec-type",
            "draft-simple",
        ]
    err = run(cmd).stderr
    m = re.search(r"decoded\s+(\d+) tokens in\s+[0-9.]+ seconds, speed:\s+([0-9.]+) t/s", err)
    out = {"tok_s": float(m.group(2)), "tokens": int(m.group(1))}
    drafted = int(re.search(r"n_drafted\s*=\s*(\d+)", err).group(1))
    acc = int(re.search(r"n_accept\s*=\s*(\d+)", err).group(1))
    out.update(accepted=acc, drafted=drafted)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ml-run", required=True)
    ap.add_argument("-m", "--model", required=True, help="the target .mlb")
    ap.add_argument("--draft", required=True, help="the draft .mlb (same tokenizer)")
    ap.add_argument(
        "--llama-bin",
        help="directory with llama-bench, llama-lookup and " "llama-speculative-simple",
    )
    ap.add_argument("--gguf", help="the target as GGUF (tools/to_gguf.py)")
    ap.add_argument("--gguf-draft", help="the draft as GGUF")
    ap.add_argument("-t", "--threads", type=int, default=1)
    ap.add_argument("-n", type=int, default=120, help="tokens to generate (default 120)")
    ap.add_argument("-c", "--ctx", type=int, default=256)
    ap.add_argument("--draft-max", type=int, default=8)
    ap.add_argument("--draft-p-min", type=float, default=0.5)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json-out")
    a = ap.parse_args()
    if a.llama_bin and not (a.gguf and a.gguf_draft):
        ap.error("--llama-bin needs --gguf and --gguf-draft")
    results: dict[str, dict[str, list[dict]]] = {}
    for rnd in range(a.rounds):
        for name, prompt in prompts().items():
            for mode in ("plain", "lookup", "draft"):
                progs = [("Krafla", krafla)] + ([("llama.cpp", llama)] if a.llama_bin else [])
                if rnd % 2:
                    progs.reverse()
                for prog, fn in progs:
                    results.setdefault(f"{name}|{mode}|{prog}", {"runs": []})["runs"].append(
                        fn(a, prompt, mode)
                    )
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)
    print_table(results, bool(a.llama_bin))


def print_table(results: dict, with_llama: bool) -> None:
    def cell(key: str) -> tuple[str, str, float]:
        runs = results.get(key, {}).get("runs", [])
        if not runs:
            return "–", "–", 0.0
        ts = statistics.median(r["tok_s"] for r in runs)
        r = runs[0]
        kept = "–"
        if "accepted" in r:
            kept = f"{r['accepted']}/{r['drafted']}"
            if "per_pass" in r:
                kept += f" ({r['per_pass']:.2f}/pass)"
        return f"{ts:.1f}", kept, ts

    progs = ["Krafla"] + (["llama.cpp"] if with_llama else [])
    hdr = ["prompt", "decoding"]
    for p in progs:
        hdr += [f"{p} tok/s", f"{p} kept", f"{p} speed-up"]
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for name in ("summarise", "free"):
        for mode in ("plain", "lookup", "draft"):
            cells = [name, mode]
            for p in progs:
                ts, kept, v = cell(f"{name}|{mode}|{p}")
                base = cell(f"{name}|plain|{p}")[2]
                cells += [ts, kept, f"{v / base:.2f}×" if base and v else "–"]
            print("| " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
