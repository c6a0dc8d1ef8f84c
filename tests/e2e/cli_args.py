#!/usr/bin/env python3
"""ml_run's options as a llama.cpp user types them: out-of-range values and conflicting
options refused with one line and exit 2, --version everywhere, and the options that change
what is generated (stop strings, seeds, one-shot chat, prompt files) checked against runs
without them.

Usage: cli_args.py --bin BUILD_DIR --work E2E_DIR
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

import numpy as np


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, timeout=120, **kw)


def must(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = run(cmd, **kw)
    assert r.returncode == 0, (r.returncode, r.stderr)
    return r


def check_refusals(ml_run: list[str], tmp: str) -> list[str]:
    failures = []
    cases = [  # (arguments, a word the one error line must contain)
        (["-t", "1000"], "--threads"),
        (["-t", "-2"], "--threads"),
        (["--repeat-penalty", "0"], "--repeat-penalty"),
        (["--repeat-penalty", "-1"], "--repeat-penalty"),
        (["--top-p", "1.5"], "--top-p"),
        (["--top-p", "-1"], "--top-p"),
        (["--top-k", "-3"], "--top-k"),
        (["--temp", "nan"], "--temp"),
        (["--temp", "inf"], "--temp"),
        (["--temp", "-1"], "--temp"),
        (["--min-p", "2"], "--min-p"),
        (["-n", "-5"], "--n-predict"),
        (["-c", "-1"], "--ctx"),
        (["-b", "0"], "--batch"),
        (["--delta-chunk", "257"], "--delta-chunk"),
        (["--delta-chunk", "-1"], "--delta-chunk"),
        (["-s", "x"], "--seed"),
        (["--bogus"], "--bogus"),
        (["-f", tmp], "directory"),
        (["-f", os.path.join(tmp, "missing.txt")], "missing.txt"),
        (["-p", "a", "-f", "-"], "excludes"),
        (["-p", "a", "--system", "s"], "--chat"),
        (["-p", "a", "-sys", "s"], "--chat"),
        (["-p", "a", "--think", "hide"], "--chat"),
        (["-p", "a", "--chat", "nope"], "unknown chat template"),
        (["--logits", "x.npy", "-p", "a"], "--tokens"),
        ([], "give a prompt"),
        (["-p", "a", "--think", "maybe", "--chat", "auto"], "--think"),
    ]
    for args, word in cases:
        r = run(
            ml_run
            + args
            + ([] if "-p" in args or "-f" in args or "--bogus" in args or not args else ["-p", "a"])
        )
        lines = r.stderr.strip().splitlines()
        ok = (
            r.returncode == 2
            and len(lines) == 1
            and lines[0].startswith("ml_run: error:")
            and word in lines[0]
        )
        print(f"{'ok' if ok else 'FAIL'}: {args}: rc={r.returncode} {r.stderr.strip()!r}")
        if not ok:
            failures.append(" ".join(args))
    return failures


def check_ignore_eos(exe, work: str, tmp: str) -> None:
    """A copy of the llama checkpoint whose end-of-text id is the greedy first token after
    "Hello": ml_run stops at once, and with --ignore-eos generates the -n tokens."""
    model = os.path.join(work, "llama-f32.mlb")
    ids = must([exe("ml_tok"), model, "encode", "Hello"]).stdout.split()
    out = os.path.join(tmp, "hello.npy")
    must([exe("ml_run"), "-m", model, "-q", "--tokens", ",".join(ids), "--logits", out])
    first = int(np.argmax(np.load(out)[-1]))
    ck = os.path.join(tmp, "llama-eos")
    # the weights linked, not copied (a few hundred MB)
    shutil.copytree(os.path.join(work, "llama"), ck, ignore=shutil.ignore_patterns("*.safetensors"))
    for f in os.listdir(os.path.join(work, "llama")):
        if f.endswith(".safetensors"):
            os.symlink(os.path.join(work, "llama", f), os.path.join(ck, f))
    for name in ("config.json", "generation_config.json"):
        cfg = json.load(open(os.path.join(ck, name)))
        cfg["eos_token_id"] = first
        json.dump(cfg, open(os.path.join(ck, name), "w"))
    eos_model = os.path.join(tmp, "llama-eos.mlb")
    src = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    must(
        [
            sys.executable,
            os.path.join(src, "tools", "convert.py"),
            ck,
            "-o",
            eos_model,
            "--quant",
            "f32",
        ]
    )
    base = [exe("ml_run"), "-m", eos_model, "-p", "Hello", "-n", "6", "--temp", "0"]
    stopped = must(base).stderr
    assert "generated: 0 tokens" in stopped, stopped
    ignored = must(base + ["--ignore-eos"]).stderr
    assert "generated: 6 tokens" in ignored, ignored


def check_logits_kv(exe, work: str, tmp: str) -> None:
    """--tokens … --logits honours --kv: the F16 and Q8_0 caches give logits that differ from
    the F32 cache's (they were identical while that path ignored the flag) by their rounding
    only (the F32 cache's logits are checked against the numpy forward in e2e.logits.*)."""
    model = os.path.join(work, "llama-f32.mlb")
    ids = ",".join(
        must([exe("ml_tok"), model, "encode", "The cache holds every key and value"]).stdout.split()
    )
    out = {}
    for kv in ("f32", "f16", "q8_0"):
        path = os.path.join(tmp, f"kv-{kv}.npy")
        must([exe("ml_run"), "-m", model, "-q", "--tokens", ids, "--logits", path, "--kv", kv])
        out[kv] = np.load(path)
    scale = float(np.abs(out["f32"]).max())
    for kv, tol in (("f16", 1e-2), ("q8_0", 5e-2)):
        diff = float(np.abs(out[kv] - out["f32"]).max())
        print(f"--logits --kv {kv}: max |diff| {diff:.3g} of logits up to {scale:.3g}")
        assert 0 < diff < tol * scale, (kv, diff, scale)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--project-version", required=True, help="the version --version must print")
    a = p.parse_args()
    exe = lambda n: os.path.join(a.bin, n)  # noqa: E731
    model = os.path.join(a.work, "llama-q8_0.mlb")
    ml_run = [exe("ml_run"), "-m", model]
    with tempfile.TemporaryDirectory() as tmp:
        failures = check_refusals(ml_run, tmp)

        for name in ("ml_run", "ml_bench", "ml_tok", "ml_server"):
            if not os.path.exists(exe(name)):
                continue
            r = run([exe(name), "--version"])
            ok = r.returncode == 0 and re.fullmatch(
                rf"{name} {re.escape(a.project_version)} \(commit \S+; ISA \w+; .+\)\n", r.stdout
            )
            print(f"{'ok' if ok else 'FAIL'}: {name} --version: {r.stdout!r}")
            if not ok:
                failures.append(f"{name} --version")
        for name, args in (("ml_bench", ["-m", model, "--nope"]), ("ml_tok", [model, "--nope"])):
            r = run([exe(name)] + args)
            lines = r.stderr.strip().splitlines()
            if not (
                r.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"{name}: error:")
            ):
                failures.append(f"{name} parse error: {r.returncode} {r.stderr!r}")

        # ml_run --info is ml_tok's dump (checked against the file in e2e.info.*); a bad file is
        # one line and exit 2.
        info = must([exe("ml_run"), "--info", model]).stdout
        assert info == must([exe("ml_tok"), "info", model]).stdout and "tensors" in info, info[:300]
        r = run([exe("ml_run"), "--info", os.path.join(tmp, "missing.mlb")])
        assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr

        check_ignore_eos(exe, a.work, tmp)
        check_logits_kv(exe, a.work, tmp)

        # -q drops the load line; without it there is exactly one, naming the model file.
        loud = must(ml_run + ["-p", "Hi", "-n", "2", "--temp", "0"]).stderr
        quiet = must(ml_run + ["-p", "Hi", "-n", "2", "--temp", "0", "-q"]).stderr
        assert loud.count(f"ml_run: loaded {model}") == 1 and "loaded" not in quiet, (loud, quiet)

        # Stop strings: the greedy text cut just before the first occurrence of the stop string.
        full = must(ml_run + ["-p", "Hello", "-n", "24", "--temp", "0", "-q"]).stdout
        reply = full[len("Hello") :].rstrip("\n")
        stop = reply[len(reply) // 2 : len(reply) // 2 + 3]
        assert len(stop) == 3 and stop.strip(), repr(reply)
        cut = must(ml_run + ["-p", "Hello", "-n", "24", "--temp", "0", "-q", "--stop", stop]).stdout
        assert cut == "Hello" + reply[: reply.index(stop)] + "\n", (cut, reply, stop)

        # --no-display-prompt prints the same completion without the prompt; -f - reads it.
        bare = must(
            ml_run + ["-p", "Hello", "-n", "24", "--temp", "0", "-q", "--no-display-prompt"]
        ).stdout
        assert bare == full[len("Hello") :], (bare, full)
        piped = must(ml_run + ["-f", "-", "-n", "24", "--temp", "0", "-q"], input="Hello").stdout
        assert piped == full, (piped, full)

        # Seeds: random by default (printed by -v), and a printed seed replays the run.
        runs = [
            must(ml_run + ["-p", "Hello", "-n", "24", "--temp", "1", "--top-k", "0", "-v"])
            for _ in range(2)
        ]
        seeds = [re.search(r"ml_run: seed (\d+)", r.stderr).group(1) for r in runs]
        assert seeds[0] != seeds[1] and runs[0].stdout != runs[1].stdout, seeds
        again = must(
            ml_run + ["-p", "Hello", "-n", "24", "--temp", "1", "--top-k", "0", "-s", seeds[0]]
        ).stdout
        assert again == runs[0].stdout, (again, runs[0].stdout)

        # One-shot chat (--chat X -p TEXT) answers as the first turn of an interactive chat.
        once = must(
            ml_run
            + [
                "--chat",
                "llama3",
                "-sys",
                "Be brief.",
                "-p",
                "Hi there",
                "-n",
                "10",
                "--temp",
                "0",
                "-q",
            ]
        ).stdout
        chat = must(
            ml_run + ["--chat", "llama3", "--system", "Be brief.", "-n", "10", "--temp", "0", "-q"],
            input="Hi there\n",
        ).stdout
        assert once.strip() and chat == once, (once, chat)
    if failures:
        raise SystemExit("FAILED: " + ", ".join(failures))
    print("ok: ml_run options")


if __name__ == "__main__":
    main()
