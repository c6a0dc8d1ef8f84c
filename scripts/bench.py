#!/usr/bin/env python3
"""Side-by-side prefill/decode benchmark of Krafla's ml_bench and (optionally) llama-bench.

Usage:
  scripts/bench.py --ml-bench build/avx512vnni/ml_bench [--ml-bench build/avx2/ml_bench]
                   -m model-q4_0.mlb [-m model-q8_0.mlb] [-t 1,2] [-p 128] [-n 64] [-r 3]
                   [--rounds 2] [--llama-bench /path/llama-bench [--llama-bench ...]]
                   [--gguf model-q4_0.gguf [--gguf model-q8_0.gguf]] [--json-out FILE]
  scripts/bench.py --base OLD/ml_bench --ml-bench NEW/ml_bench -m model.mlb [...]   # A/B
  scripts/bench.py --from-json FILE [FILE...]     # reprint the table of earlier runs

Each --ml-bench / --llama-bench takes PATH or LABEL=PATH (the label names the column; by
default the ISA ml_bench reports, or the llama-bench parent directory). --gguf files pair with
-m files in order: they must hold the same weights in the same quantization. With as many
llama-bench binaries as ml_bench binaries they pair in order (avx512 with avx512, avx2 with
avx2); with one, every ml_bench is compared with it.

Fairness on a noisy shared machine: the two programs alternate per configuration (model,
threads, binary pair) and per round, in ABBA order, so slow drift in the background load hits
both alike; every invocation has its own untimed warm-up; the reported number is the median
over rounds of each invocation's median of -r repeats. Decode is timed after the prompt in
both programs (each runs its tg test with -d p), so the attention work per token is the
same. --max-load waits (up to --wait-s) for
the 1-minute load average to drop below a bound before each measurement, and the load seen
is printed with the results.

A/B of two Krafla builds (--base, e.g. the parent commit's ml_bench; scripts/bench_ab.sh
builds two commits and calls this): the same alternation, both on the .mlb, and for each round
the ratio of the two; the table gives the median ratio and its spread (lowest–highest round),
so a change is shown against its parent with the noise it was measured in.

Prints a Markdown table (speeds in tokens/s; ratio = Krafla / llama.cpp, or --ml-bench /
--base, > 1 means the first is faster). Stdlib only; run with /usr/bin/python3.
"""
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import statistics
import struct
import subprocess
import sys
import time

PROG = "bench.py"
RUN_TIMEOUT_S = 3600


class BenchError(Exception):
    pass


def die(msg: str) -> None:
    print(f"{PROG}: error: {msg}", file=sys.stderr)
    sys.exit(2)


def split_label(spec: str) -> tuple[str | None, str]:
    if "=" in spec and not os.path.exists(spec):
        label, path = spec.split("=", 1)
        return label, path
    return None, spec


def int_list(text: str) -> list[int]:
    """Thread counts: "1,2,4", a range "1-16" (every count in it), "all" (1 up to the cores
    here), or a mix ("1,2,4-8")."""
    vals: list[int] = []
    try:
        for item in (x.strip() for x in text.split(",")):
            if item == "all":
                vals += range(1, (os.cpu_count() or 1) + 1)
            elif "-" in item:
                lo, hi = (int(x) for x in item.split("-", 1))
                vals += range(lo, hi + 1)
            elif item:
                vals.append(int(item))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"'{text}' is not a list of thread counts (e.g. 1,2 or 1-16 or all)"
        )
    if not vals or any(v < 1 for v in vals):
        raise argparse.ArgumentTypeError(f"'{text}': thread counts must be >= 1")
    return list(dict.fromkeys(vals))


def mlb_summary(path: str) -> tuple[str, str]:
    """(model name, quant description) from a .mlb header (docs/format.md); a GGUF file (which
    ml_bench runs too) is named by its file name alone."""
    with open(path, "rb") as f:
        head = f.read(24)
        if head[:4] == b"GGUF":
            return os.path.splitext(os.path.basename(path))[0], "gguf"
        if len(head) < 24 or head[:8] != b"KRAFLAMB":
            raise BenchError(f"{path}: not a .mlb file (bad magic)")
        (jsize,) = struct.unpack_from("<Q", head, 16)
        meta = json.loads(f.read(jsize).decode("utf-8"))
    dtypes = {t["name"]: t["dtype"] for t in meta.get("tensors", [])}
    mats = sorted(
        {d for n, d in dtypes.items() if n.startswith("blk.") and d not in ("f32", "bytes")}
    )
    quant = "+".join(mats) or "?"
    extra = [
        f"{n} {dtypes[n]}" for n in ("tok_embd", "output") if n in dtypes and dtypes[n] not in mats
    ]
    if extra:
        quant += f" ({', '.join(extra)})"
    c = meta.get("config", {})
    name = os.path.splitext(os.path.basename(path))[0]
    if c:
        name += f" [{c.get('arch')} {c.get('n_layers')}L d{c.get('dim')}]"
    return name, quant


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def load1() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def wait_for_quiet(max_load: float | None, wait_s: float) -> None:
    if max_load is None:
        return
    t0 = time.time()
    while load1() > max_load and time.time() - t0 < wait_s:
        time.sleep(5)


def run(cmd: list[str]) -> str:
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    except FileNotFoundError:
        raise BenchError(f"cannot run {cmd[0]}: not found")
    except subprocess.TimeoutExpired:
        raise BenchError(f"{' '.join(cmd)}: timed out after {RUN_TIMEOUT_S} s")
    if p.returncode != 0:
        tail = "\n".join(p.stderr.strip().splitlines()[-5:])
        raise BenchError(f"{' '.join(cmd)}: exit {p.returncode}\n{tail}")
    return p.stdout


def bench_tests(cmd: list[str], extra: list[str], a: argparse.Namespace) -> dict[str, dict]:
    """The two tests of a binary taking llama-bench's options (ml_bench does), each when its count
    is > 0: "prefill" of -p tokens from an empty cache, "decode" of -n tokens after a -p token
    prompt. cmd: the binary with -m MODEL -t THREADS; extra: arguments after the test's own."""
    tests = {}
    for key, n_prompt, n_gen, depth in (
        ("prefill", a.n_prompt, 0, 0),
        ("decode", 0, a.n_gen, a.n_prompt),
    ):
        if max(n_prompt, n_gen) > 0:
            sizes = ["-p", str(n_prompt), "-n", str(n_gen), "-d", str(depth), "-r", str(a.reps)]
            rows = json.loads(run(cmd + sizes + ["-o", "json"] + extra))
            if len(rows) != 1:
                raise BenchError(f"{cmd[0]}: expected one test, got {len(rows)}")
            tests[key] = rows[0]
    return tests


def krafla_once(binary: str, model: str, threads: int, a: argparse.Namespace) -> dict:
    """The same two tests as llama_once, each row with the ISA it ran."""
    res = {"prefill_tok_s": 0.0, "decode_tok_s": 0.0}
    for key, t in bench_tests([binary, "-m", model, "-t", str(threads)], [], a).items():
        res[f"{key}_tok_s"] = median(t["samples_ts"])
        res["isa"], res[key] = t["isa"], t
    return res


def llama_once(binary: str, gguf: str, threads: int, a: argparse.Namespace) -> dict:
    """Prefill of -p tokens from an empty cache; decode of -n tokens after a -p token prompt."""
    res = {"prefill_tok_s": 0.0, "decode_tok_s": 0.0}
    for key, t in bench_tests([binary, "-m", gguf, "-t", str(threads)], a.llama_args, a).items():
        res[f"{key}_tok_s"] = median(t["samples_ts"])
        res["info"] = t
    return res


def pairs(a: argparse.Namespace) -> list[tuple[tuple[str, str], tuple[str, str] | None]]:
    """(Krafla label, path) with its llama-bench (label, path) or None."""
    kb = [split_label(s) for s in a.ml_bench]
    lb = [split_label(s) for s in a.llama_bench]
    if lb and len(lb) not in (1, len(kb)):
        raise BenchError(
            f"{len(lb)} --llama-bench for {len(kb)} --ml-bench: give one, or one per ml_bench"
        )
    out = []
    for i, (label, path) in enumerate(kb):
        other = None
        if lb:
            ll, lp = lb[i if len(lb) == len(kb) else 0]
            other = (
                ll or os.path.basename(os.path.dirname(os.path.dirname(os.path.abspath(lp)))),
                lp,
            )
        out.append(((label or "", path), other))
    return out


def measure(a: argparse.Namespace) -> list[dict]:
    models = list(zip(a.model, a.gguf if a.gguf else [None] * len(a.model)))
    results = []
    for mlb, gguf in models:
        name, quant = mlb_summary(mlb)
        for (klabel, kpath), llama in pairs(a):
            for t in a.threads:
                row = {
                    "model": name,
                    "quant": quant,
                    "mlb": mlb,
                    "gguf": gguf,
                    "threads": t,
                    "krafla_bin": kpath,
                    "krafla_label": klabel,
                    "krafla": [],
                    "llama": [],
                    "load": [],
                }
                if a.base:
                    blabel, bpath = split_label(a.base)
                    row["llama_label"], row["llama_bin"] = blabel or "base", bpath
                elif llama and gguf:
                    row["llama_label"], row["llama_bin"] = llama
                other = a.base or (llama and gguf)
                for rnd in range(a.rounds):
                    order = ["k", "l"] if rnd % 2 == 0 else ["l", "k"]
                    for who in order:
                        if who == "l" and not other:
                            continue
                        wait_for_quiet(a.max_load, a.wait_s)
                        row["load"].append(load1())
                        if who == "k":
                            r = krafla_once(kpath, mlb, t, a)
                            row["krafla_label"] = row["krafla_label"] or r.get("isa", "")
                            row["krafla"].append(r)
                        elif a.base:
                            r = krafla_once(row["llama_bin"], mlb, t, a)
                            row["llama"].append(r)
                        else:
                            r = llama_once(llama[1], gguf, t, a)
                            row["llama"].append(r)
                        names = ("new", "base") if a.base else ("Krafla", "llama.cpp")
                        print(
                            f"{PROG}: {name} t={t} round {rnd + 1}/{a.rounds} "
                            f"{names[0] if who == 'k' else names[1]}: prefill "
                            f"{r['prefill_tok_s']:.2f}, decode {r['decode_tok_s']:.2f} tok/s "
                            f"(load {load1():.1f})",
                            file=sys.stderr,
                        )
                results.append(row)
                save_json(a, results)
    return results


def save_json(a: argparse.Namespace, results: list[dict]) -> None:
    """Rewritten after every configuration, so an interrupted run keeps what it measured."""
    if a.json_out:
        with open(a.json_out, "w") as f:
            json.dump({"args": vars(a), "results": results}, f, indent=1)


def fmt(x: float | None) -> str:
    return "–" if x is None or x != x or x == 0 else f"{x:.2f}"


def ratio(k: float | None, ll: float | None) -> str:
    return "–" if not k or not ll or k != k or ll != ll else f"{k / ll:.2f}×"


def round_ratios(r: dict, key: str) -> list[float]:
    """Each round's ratio of the first program to the other (the lists are in round order)."""
    return [k[key] / o[key] for k, o in zip(r["krafla"], r["llama"]) if k[key] > 0 and o[key] > 0]


def spread(ratios: list[float]) -> str:
    if not ratios:
        return "–"
    return f"{median(ratios):.3f}× ({min(ratios):.3f}–{max(ratios):.3f})"


def ab_table(results: list[dict], a: argparse.Namespace) -> str:
    p, n = a.n_prompt, a.n_gen
    hdr = ["model", "quant", "threads", f"base pp{p}", f"new pp{p}", "pp new/base"]
    hdr += [f"base tg{n}", f"new tg{n}", "tg new/base", "load"]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * 8) + "|"]
    for r in results:
        cells = [r["model"], r["quant"], str(r["threads"])]
        r["summary"] = {}
        for key in ("prefill_tok_s", "decode_tok_s"):
            base = median([x[key] for x in r["llama"]])
            new = median([x[key] for x in r["krafla"]])
            ratios = round_ratios(r, key)
            r["summary"][key] = {"base": base, "new": new, "ratios": ratios}
            cells += [fmt(base), fmt(new), spread(ratios)]
        loads = [x for x in r["load"] if x == x]
        cells.append(f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def table(results: list[dict], a: argparse.Namespace) -> str:
    if getattr(a, "base", None):
        return ab_table(results, a)
    p, n = a.n_prompt, a.n_gen
    hdr = [
        "model",
        "quant",
        "Krafla",
        "llama.cpp",
        "threads",
        f"Krafla pp{p}",
        f"llama.cpp pp{p}",
        "pp ratio",
        f"Krafla tg{n}",
        f"llama.cpp tg{n}",
        "tg ratio",
        "load",
    ]
    lines = ["| " + " | ".join(hdr) + " |", "|" + "|".join(["---"] * 4 + ["---:"] * 8) + "|"]
    for r in results:
        kp = median([x["prefill_tok_s"] for x in r["krafla"]])
        kd = median([x["decode_tok_s"] for x in r["krafla"]])
        lp = median([x["prefill_tok_s"] for x in r["llama"]]) if r["llama"] else None
        ld = median([x["decode_tok_s"] for x in r["llama"]]) if r["llama"] else None
        r["summary"] = {
            "krafla_prefill": kp,
            "krafla_decode": kd,
            "llama_prefill": lp,
            "llama_decode": ld,
        }
        loads = [x for x in r["load"] if x == x]
        load = f"{min(loads):.1f}–{max(loads):.1f}" if loads else "?"
        cells = [
            r["model"],
            r["quant"],
            r["krafla_label"],
            r.get("llama_label", "–"),
            str(r["threads"]),
            fmt(kp),
            fmt(lp),
            ratio(kp, lp),
            fmt(kd),
            fmt(ld),
            ratio(kd, ld),
            load,
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def now_utc() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def header(results: list[dict], a: argparse.Namespace) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    info = next((x["info"] for r in results for x in r["llama"] if "info" in x), None)
    out = [
        f"date: {getattr(a, 'started', None) or now_utc()}, "
        f"cpu: {cpu}, {os.cpu_count()} logical CPUs",
        f"-p {a.n_prompt} -n {a.n_gen} -r {a.reps}, rounds {a.rounds} (ABBA interleaved)",
    ]
    if getattr(a, "base", None):
        new = ", ".join(sorted({r["krafla_bin"] for r in results}))
        out.append(f"A/B: new {new} against base {split_label(a.base)[1]}")
    if info:
        out.append(
            f"llama.cpp build {info.get('build_commit')} ({info.get('build_number')}), "
            f"backends {info.get('backends')}, n_batch {info.get('n_batch')}, "
            f"n_ubatch {info.get('n_ubatch')}, flash_attn {info.get('flash_attn')}, "
            f"type_k {info.get('type_k')}"
        )
    return "\n".join(out)


def reprint(a: argparse.Namespace) -> None:
    results = []
    for path in a.from_json:
        try:
            with open(path) as f:
                saved = json.load(f)
        except (OSError, ValueError) as e:
            die(f"{path}: {e}")
        for k in ("n_prompt", "n_gen", "reps", "rounds", "started", "base"):
            setattr(a, k, saved["args"].get(k))
        results += saved["results"]
    print(header(results, a))
    print()
    print(table(results, a))


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument(
        "--ml-bench",
        action="append",
        default=[],
        metavar="[LABEL=]PATH",
        help="Krafla ml_bench binary (repeatable)",
    )
    ap.add_argument(
        "-m",
        "--model",
        action="append",
        default=[],
        metavar="MLB",
        help="Krafla .mlb model (repeatable)",
    )
    ap.add_argument(
        "--llama-bench",
        action="append",
        default=[],
        metavar="[LABEL=]PATH",
        help="llama.cpp llama-bench binary (repeatable)",
    )
    ap.add_argument(
        "--base",
        metavar="[LABEL=]PATH",
        help="A/B: the ml_bench of the build to compare --ml-bench with, on the same .mlb",
    )
    ap.add_argument(
        "--gguf",
        action="append",
        default=[],
        metavar="GGUF",
        help="GGUF with the same weights as the matching -m (repeatable, same order)",
    )
    ap.add_argument(
        "-t",
        "--threads",
        type=int_list,
        default=[1],
        help="thread counts: 1,2 or a range 1-16 or all (1 up to the cores): a thread-scaling "
        "curve",
    )
    ap.add_argument("-p", "--n-prompt", type=int, default=128, help="prompt tokens (default 128)")
    ap.add_argument("-n", "--n-gen", type=int, default=64, help="generated tokens (default 64)")
    ap.add_argument("-r", "--reps", type=int, default=3, help="repeats per invocation (default 3)")
    ap.add_argument(
        "--rounds",
        type=int,
        default=2,
        help="invocations of each program per configuration, alternating (default 2)",
    )
    ap.add_argument(
        "--max-load",
        type=float,
        default=None,
        help="before each measurement wait until the 1-min load average is below this",
    )
    ap.add_argument("--wait-s", type=float, default=300, help="longest such wait (default 300 s)")
    ap.add_argument(
        "--llama-args",
        default="",
        help="extra llama-bench arguments, one string (e.g. '-fa 1 -ub 128')",
    )
    ap.add_argument("--json-out", help="also write every raw result to this JSON file")
    ap.add_argument(
        "--from-json",
        nargs="+",
        metavar="JSON",
        help="measure nothing: print the table of earlier --json-out files (same -p/-n)",
    )
    a = ap.parse_args(argv)
    a.llama_args = a.llama_args.split()
    if a.from_json:
        reprint(a)
        return
    if not a.ml_bench or not a.model:
        die("--ml-bench and -m are required")
    if a.gguf and len(a.gguf) != len(a.model):
        die(
            f"{len(a.gguf)} --gguf for {len(a.model)} -m: give one GGUF per .mlb, in the same order"
        )
    if a.gguf and not a.llama_bench:
        die("--gguf needs --llama-bench")
    if a.base and (a.llama_bench or a.gguf):
        die("--base compares two Krafla builds: leave out --llama-bench and --gguf")
    if a.n_prompt < 0 or a.n_gen < 0 or a.n_prompt + a.n_gen == 0:
        die("-p and -n must be >= 0 and not both 0")
    if a.reps < 1 or a.rounds < 1:
        die("-r and --rounds must be >= 1")
    bins = a.ml_bench + a.llama_bench + ([a.base] if a.base else [])
    for path in a.model + a.gguf + [split_label(s)[1] for s in bins]:
        if not os.path.exists(path):
            die(f"{path}: no such file")
    a.started = now_utc()
    try:
        results = measure(a)
    except BenchError as e:
        die(str(e))
    except KeyboardInterrupt:
        die("interrupted")
    print(header(results, a))
    print()
    print(table(results, a))
    save_json(a, results)


if __name__ == "__main__":
    main()
