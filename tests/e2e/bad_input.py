#!/usr/bin/env python3
"""The bad-input matrix (docs/reliability.md): every executable x every kind of bad input,
table-driven. Each run must exit 2 (never a signal, never past its time limit) with exactly one
stderr line holding "error", the last one, "EXE: error: …" naming what is wrong (a word checked).

Usage: PYTHONPATH=tools bad_input.py --bin BUILD_DIR --work E2E_DIR   (ctest sets PYTHONPATH)
"""
from __future__ import annotations

import argparse
import os
import subprocess
import tempfile

from convert import mlb  # tools/convert/mlb.py (on PYTHONPATH): writes the broken tokenizer files

EXES = ("ml_run", "ml_bench", "ml_tok", "ml_server")


def model_files(tmp: str, good: bytes) -> dict[str, tuple[str, str]]:
    """name -> (path, a word the error names)."""

    def put(name: str, data: bytes) -> str:
        p = os.path.join(tmp, name)
        with open(p, "wb") as f:
            f.write(data)
        return p

    flipped = bytearray(good)
    flipped[13] ^= 0x10  # a bit of the header's flags word
    files = {
        "truncated": (put("truncated.mlb", good[: len(good) // 2]), "not within"),
        "empty": (put("empty.mlb", b""), "empty"),
        "wrong magic": (put("magic.mlb", b"XXXXXXXX" + good[8:]), "magic"),
        "bit-flipped header": (put("flipped.mlb", bytes(flipped)), "flags"),
        "directory": (tmp, "not a regular file"),
        "/dev/zero": ("/dev/zero", "not a regular file"),
        "missing": (os.path.join(tmp, "missing.mlb"), "no such file"),
    }
    # tokenizer files: bad JSON, and valid JSON without the model section
    for name, body, word in (
        ("tokenizer bad JSON", b'{"model": {"type": "BPE", "vocab": {', "tokenizer.json"),
        ("tokenizer missing field", b'{"added_tokens": []}', "model"),
    ):
        p = os.path.join(tmp, name.replace(" ", "-") + ".mlt")
        specs = [
            mlb.TensorSpec(n, "bytes", (len(d),))
            for n, d in (("tokenizer.json", body), ("tokenizer_config.json", b"{}"))
        ]
        with mlb.MlbWriter(p, "tokenizer", specs, None) as w:
            w.add("tokenizer.json", body)
            w.add("tokenizer_config.json", b"{}")
        files[name] = (p, word)
    return files


def per_exe(exe: str, path: str) -> list[str]:
    """The command line that opens `path` as exe's model."""
    return {
        "ml_run": ["-m", path, "-q", "-p", "hi", "-n", "1"],
        "ml_bench": ["-m", path, "-p", "8", "-n", "1"],
        "ml_tok": [path, "encode", "hi"],
        "ml_server": ["-m", path, "--port", "0"],
    }[exe]


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    a = p.parse_args()
    model = os.path.join(a.work, "llama-q8_0.mlb")
    good = open(model, "rb").read()
    cases: list[tuple[str, list[str], str]] = []  # (exe, args, word)
    with tempfile.TemporaryDirectory() as tmp:
        for path, word in model_files(tmp, good).values():
            for exe in EXES:
                # a tokenizer file is refused as such by the executables that need a model
                w = "tokenizer file" if path.endswith(".mlt") and exe != "ml_tok" else word
                cases.append((exe, per_exe(exe, path), w))
        m = model
        run = ["-m", m, "-q", "-n", "1"]
        cases += [
            ("ml_run", run + ["-p", ""], "give a prompt"),
            (
                "ml_run",
                ["-m", m, "-q", "--tokens", "1,99999999", "--logits", os.path.join(tmp, "x.npy")],
                "vocabulary",
            ),
            (
                "ml_run",
                ["-m", m, "-q", "--tokens", "1,-3", "--logits", os.path.join(tmp, "x.npy")],
                "bad token id",
            ),
            ("ml_tok", [m, "decode", "5", "99999999"], "vocabulary"),
            ("ml_tok", [m, "decode", "x"], "bad token id"),
            ("ml_run", run + ["-p", "hi", "-c", "999999"], "maximum context"),
            ("ml_run", run + ["-p", "hi", "-c", "100000000"], "--ctx"),
            ("ml_run", run + ["-p", "hi", "-c", "-1"], "--ctx"),
            ("ml_server", ["-m", m, "--port", "0", "-c", "999999"], "maximum context"),
            ("ml_server", ["-m", m, "--port", "0", "-c", "100000000"], "--ctx"),
            ("ml_run", run + ["-p", "hi", "-t", "10000"], "--threads"),
            ("ml_bench", ["-m", m, "-t", "0"], "--threads"),
            ("ml_bench", ["-m", m, "-t", "10000"], "--threads"),
            ("ml_server", ["-m", m, "-t", "10000"], "--threads"),
            ("ml_run", run + ["-p", "hi", "-n", "-5"], "--n-predict"),
            ("ml_run", run + ["-p", "hi", "--temp", "-1"], "--temp"),
            ("ml_run", run + ["-p", "hi", "--temp", "nan"], "--temp"),
            ("ml_server", ["-m", m, "--temp", "nan"], "--temp"),
            ("ml_server", ["-m", m, "--parallel", "0"], "--parallel"),
            ("ml_server", ["-m", m, "--port", "99999"], "--port"),
        ]
        for exe in EXES:
            args = [m, "encode", "hi"] if exe == "ml_tok" else ["-m", m]
            cases.append((exe, args + ["--no-such-flag"], "no-such-flag"))
        failures = []
        for exe, args, word in cases:
            cmd = [os.path.join(a.bin, exe)] + args
            try:
                r = subprocess.run(
                    cmd, capture_output=True, text=True, errors="replace", timeout=30
                )
            except subprocess.TimeoutExpired:
                failures.append(f"{exe} {args}: still running after 30 s")
                print(f"FAIL (hang): {exe} {' '.join(args)}")
                continue
            lines = [x for x in r.stderr.splitlines() if x.strip()]
            errors = [x for x in lines if "error" in x.lower()]
            ok = (
                r.returncode == 2
                and len(errors) == 1
                and lines[-1] == errors[0]
                and errors[0].startswith(f"{exe}: error:")
                and word.lower() in errors[0].lower()
            )
            shown = " ".join(x if len(x) < 60 else x[:57] + "..." for x in args)
            print(f"{'ok' if ok else 'FAIL'}: {exe} {shown}: rc={r.returncode} {lines[-1:]!r}")
            if not ok:
                failures.append(f"{exe} {shown}")
    print(f"{len(cases) - len(failures)}/{len(cases)} bad inputs refused in one line, exit 2")
    if failures:
        raise SystemExit("FAILED: " + "; ".join(failures))


if __name__ == "__main__":
    main()
