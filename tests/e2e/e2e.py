#!/usr/bin/env python3
"""End-to-end tests driven by ctest: gen_random → convert → ml_run, checked against the
independent numpy forward (tools/ref_forward.py) and against ml_run itself (thread counts,
batch sizes), plus bad model files fed to the executables.

Usage: e2e.py --bin BUILD_DIR --work WORK_DIR CASE
Cases: setup | logits:MODEL:QUANT | threads:MODEL:QUANT | batch:MODEL:QUANT | badfiles |
       lengths:MODEL:QUANT | actquant:MODEL:QUANT | packcache:MODEL | big |
       cli:MODEL | bench:MODEL | info:MODEL | tok:MODEL | llama2c
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

import compare  # tests/e2e/compare.py, next to this script

sys.path.insert(
    0,
    os.path.join(
        os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "tools"
    ),
)
import mlb as mlbfile  # noqa: E402  tools/mlb.py: the .mlb reader written from docs/format.md

SRC = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable
# Random checkpoints: tiny Llama-3-shaped (byte-level BPE vocabulary, llama3 rope scaling is
# not in the tiny shape) and a Mistral-shaped one whose sliding window (16) is shorter than
# the prompts below, so the window is exercised.
MODELS = {
    "llama": ["--arch", "llama", "--shape", "tiny", "--tokenizer", "llama3", "--seed", "11"],
    "mistral": ["--arch", "mistral", "--shape", "mistral-tiny", "--seed", "12"],
    # Issue 3: q/k/v biases and a per-layer window shorter than the prompt (Qwen2); head_dim
    # != dim/heads and q/k norms (Qwen3); layers without RoPE (SmolLM3); the GPT-2-style
    # vocabulary on the llama architecture (SmolLM2); yarn and linear RoPE scaling.
    "qwen2": ["--arch", "qwen2", "--shape", "qwen2-tiny", "--seed", "21"],
    "qwen3": ["--arch", "qwen3", "--shape", "qwen3-tiny", "--seed", "22"],
    "smollm3": ["--arch", "smollm3", "--shape", "smollm3-tiny", "--seed", "23"],
    "smollm2": ["--arch", "smollm2", "--shape", "smollm2-tiny", "--seed", "24"],
    "qwen3-yarn": ["--arch", "qwen3", "--shape", "qwen3-tiny", "--rope", "yarn", "--seed", "25"],
    # Issue 4: Gemma 2 (soft-caps, alternate sliding layers), Gemma 3 (local/global RoPE,
    # q/k norms) and a Gemma 3 image-text checkpoint whose vision tower must be skipped.
    "gemma2": ["--arch", "gemma2", "--seed", "31"],
    "gemma3": ["--arch", "gemma3", "--seed", "32"],
    "gemma3-vl": ["--arch", "gemma3-vl", "--seed", "33"],
    "smollm2-linear": [
        "--arch",
        "smollm2",
        "--shape",
        "smollm2-tiny",
        "--rope",
        "linear",
        "--rope-factor",
        "2",
        "--seed",
        "26",
    ],
    # Issue 5: Qwen3.5 (Gated DeltaNet + gated attention, image-text layout whose vision tower
    # and MTP head are skipped); qwen35-long has a 4096-row embedding so that its 600-token
    # prompt's logits stay small, for the prompt-length cases (prefill across batch chunks).
    "qwen35": ["--arch", "qwen3.5", "--seed", "51"],
    "qwen35-long": ["--arch", "qwen3.5", "--seed", "52", "--vocab", "4096"],
}
PROMPT_LEN = {"qwen35-long": 600}  # tokens of the reference prompt (default N_TOKENS)
QUANTS = ["f32", "q8_0", "q4_0"]
# Thresholds of issue 2. F32 is compared by the largest |Δ| relative to the largest |logit|
# of each position.
LIMITS = {"f32": ["--max-rel", "1e-4"], "q8_0": ["--max-kl", "0.01"], "q4_0": ["--max-kl", "0.1"]}
# case_big past 7 tokens (see there): measured Q8_0 KL mean 0.013-0.016, max 0.037-0.060 at
# 130-600 tokens (top-1 1.0); Q4_0 mean 0.013-0.016, max 0.028-0.034 (top-1 0.998); the
# limits leave about 3x.
BIG_LONG_LIMITS = {
    "f32": LIMITS["f32"],
    "q8_0": ["--mean-kl", "0.05", "--max-kl", "0.2", "--min-top1", "0.98"],
    "q4_0": ["--mean-kl", "0.05", "--max-kl", "0.2", "--min-top1", "0.98"],
}
N_TOKENS = 40


# Cross builds (Arm): ctest passes CMake's emulator (qemu-user with a -cpu model) and every
# built executable runs under it; the Python tools still run on the host.
EMULATOR: list[str] = []
BIN_DIR = ""


def run(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    if EMULATOR and os.path.abspath(os.path.dirname(cmd[0])) == BIN_DIR:
        cmd = EMULATOR + cmd
    print("+", " ".join(cmd), flush=True)
    return subprocess.run(cmd, text=True, capture_output=True, **kw)


def must(cmd: list[str], **kw) -> subprocess.CompletedProcess:
    r = run(cmd, **kw)
    if r.returncode != 0:
        sys.stderr.write(r.stdout + r.stderr)
        raise SystemExit(f"FAILED ({r.returncode}): {' '.join(cmd)}")
    return r


def tool(name: str) -> list[str]:
    return [PY, os.path.join(SRC, "tools", name)]


def prompt_ids(work: str, model: str) -> list[int]:
    with open(os.path.join(work, model, "config.json")) as f:
        cfg = json.load(f)
    vocab = cfg.get("vocab_size") or cfg["text_config"]["vocab_size"]
    rng = np.random.default_rng(7)
    return [int(x) for x in rng.integers(0, min(vocab, 32000), PROMPT_LEN.get(model, N_TOKENS))]


def mlb(work: str, model: str, quant: str) -> str:
    return os.path.join(work, f"{model}-{quant}.mlb")


def ml_run(a, path: str, tokens: list[int], out: str, extra: list[str] | None = None) -> None:
    """ml_run -m PATH on the token ids, the logits written to out."""
    ids = ",".join(map(str, tokens))
    cmd = [os.path.join(a.bin, "ml_run"), "-m", path, "--tokens", ids, "--logits", out]
    must(cmd + (extra or []))


def ml_run_logits(a, model: str, quant: str, extra: list[str], out: str) -> np.ndarray:
    ml_run(a, mlb(a.work, model, quant), prompt_ids(a.work, model), out, extra)
    return np.load(out)


def case_setup(a) -> None:
    os.makedirs(a.work, exist_ok=True)
    must(
        [
            "bash",
            os.path.join(SRC, "scripts", "fetch_tokenizers.sh"),
            "llama2",
            "llama3",
            "qwen3",
            "gemma3",
            "qwen3_5",
        ]
    )
    only = os.environ.get("KRAFLA_E2E_MODELS")
    for model, args in MODELS.items():
        if only and model not in only.split(","):
            continue
        d = os.path.join(a.work, model)
        must(tool("gen_random.py") + args + ["-o", d])
        ids = ",".join(map(str, prompt_ids(a.work, model)))
        must(
            tool("ref_forward.py")
            + [d, "--tokens", ids, "--out", os.path.join(a.work, f"{model}-ref.npy")]
        )
        for q in QUANTS:
            must(tool("convert.py") + [d, "-o", mlb(a.work, model, q), "--quant", q])


def case_logits(a, model: str, quant: str) -> None:
    out = os.path.join(a.work, f"{model}-{quant}-krafla.npy")
    ml_run_logits(a, model, quant, ["-t", "2"], out)
    r = must(
        [
            PY,
            os.path.join(SRC, "tests", "e2e", "compare.py"),
            os.path.join(a.work, f"{model}-ref.npy"),
            out,
        ]
        + LIMITS[quant]
    )
    print(r.stdout)


def case_lengths(a, model: str, quant: str) -> None:
    """Prompts of 1, 7, 130 and 600 tokens (one and several --batch 128 chunks), and a
    72-token run one token per forward step (the decode path carrying the conv and DeltaNet
    state), each against the reference's logits for the same prefix (causal: the prefix's
    logits do not depend on later tokens)."""
    ids = prompt_ids(a.work, model)
    ref = np.load(os.path.join(a.work, f"{model}-ref.npy"))
    for n, extra in ((1, []), (7, []), (130, []), (len(ids), []), (72, ["--batch", "1"])):
        out = os.path.join(a.work, f"{model}-{quant}-len{n}.npy")
        ml_run(a, mlb(a.work, model, quant), ids[:n], out, extra)
        # Named per quant: the three quants' cases run at once under ctest -j.
        part = os.path.join(a.work, f"{model}-{quant}-ref-len{n}.npy")
        np.save(part, ref[:n])
        r = must([PY, os.path.join(SRC, "tests", "e2e", "compare.py"), part, out] + LIMITS[quant])
        print(f"{n} tokens {' '.join(extra)}: {r.stdout.strip()}")


def case_actquant(a, model: str, quant: str) -> None:
    """The reference with --act-quant (the inputs of quantized matmuls rounded to 8 bits per
    block, as the runtime's dot products take them) reproduces the runtime's quantized logits
    to float rounding, where the weights-only reference differs by the 8-bit activation noise
    (~6e-3 of the largest logit): the runtime's quantized path does what it documents.
    One-token prompts, 8 of them: now and then an activation lands on the other side of a
    rounding boundary by float noise alone (a flip, ~1e-3 on the logits), so the check is that
    most prompts agree to 1e-5 and every prompt to 2e-2."""
    d = os.path.join(a.work, model)
    rels = []
    for tok in prompt_ids(a.work, model)[:8]:
        ref = os.path.join(a.work, f"{model}-{quant}-ref-actquant.npy")
        must(
            tool("ref_forward.py")
            + [d, "--tokens", str(tok), "--out", ref, "--quantized-weights", quant, "--act-quant"]
        )
        out = os.path.join(a.work, f"{model}-{quant}-actquant-krafla.npy")
        ml_run(a, mlb(a.work, model, quant), [tok], out)
        rels.append(compare.metrics(np.load(ref), np.load(out))["max_rel"])
    # The scalar build keeps ggml's f16 block scale for activations (the SIMD builds an f32 one,
    # as the reference does): up to 2^-11 of each block's scale, so a looser "agree".
    with open(os.path.join(a.bin, "CMakeCache.txt")) as f:
        scalar = "KRAFLA_ISA:STRING=scalar\n" in f.read()
    agree = 1e-3 if scalar else 1e-5
    print("max |d| / max |ref| per prompt: " + " ".join(f"{x:.2e}" for x in rels))
    close = sum(x <= agree for x in rels)
    if close < len(rels) // 2 + 1 or max(rels) > 2e-2:
        raise SystemExit(
            f"FAILED: {close} of {len(rels)} prompts within {agree:g} (need a majority), "
            f"worst {max(rels):.2e} (limit 2e-2)"
        )


def case_big(a) -> None:
    """Issue 5's Qwen3.5-0.8B-shaped check (ctest label "long", not in the default suite: tens of
    minutes and ~6 GB of files): the full 0.8B text shape (24 layers, vocab 248320) in bf16,
    prompts of 1, 7, 130 and 600 tokens, every position's logits against the numpy reference.
    F32 against the plain reference (max rel 1e-4). Q8_0 and Q4_0 against the reference run on
    the same quantized weights with --act-quant (activations rounded to 8 bits like the runtime's
    dot products): the tiny limits up to 7 tokens; past that BIG_LONG_LIMITS. This random
    24-layer shape is near-chaotic (tools/gen_qwen35.py): an activation that float noise puts on
    the other side of an 8-bit rounding boundary moves the logits by ~1e-3, and the layers and
    the recurrent state carry that on, so over long prompts the quantized runs settle at KL
    ~0.015 (Q8_0) from a reference that is exact to float rounding on short ones (F32 stays
    within 1.5e-5 at 600 tokens); the tiny checkpoint holds the tight quantized limits at
    every length (e2e.lengths.qwen35.*)."""
    d = os.path.join(a.work, "qwen35-08b")
    if not os.path.isfile(os.path.join(d, "model.safetensors")):
        must(
            tool("gen_random.py")
            + [
                "--arch",
                "qwen3.5",
                "--shape",
                "qwen3.5-0.8b",
                "--dtype",
                "bf16",
                "--seed",
                "61",
                "-o",
                d,
            ]
        )
    ids = [int(x) for x in np.random.default_rng(9).integers(0, 32000, 600)]
    lengths = (1, 7, 130, 600)
    for q in QUANTS:
        tag = "" if q == "f32" else "-actquant"
        ref_path = os.path.join(a.work, f"qwen35-08b-ref-{q}{tag}-{lengths[-1]}.npy")
        if not os.path.isfile(ref_path):
            extra = [] if q == "f32" else ["--quantized-weights", q, "--act-quant"]
            must(
                tool("ref_forward.py")
                + [d, "--tokens", ",".join(map(str, ids[: lengths[-1]])), "--out", ref_path]
                + extra
            )
        ref = np.load(ref_path, mmap_mode="r")
        path = os.path.join(a.work, f"qwen35-08b-{q}.mlb")
        must(tool("convert.py") + [d, "-o", path, "--quant", q])
        for n in lengths:
            out = os.path.join(a.work, f"qwen35-08b-{q}-len{n}.npy")
            ml_run(a, path, ids[:n], out)
            part = os.path.join(a.work, f"qwen35-08b-ref-len{n}.npy")
            np.save(part, np.asarray(ref[:n]))
            limits = BIG_LONG_LIMITS[q] if n > 7 else LIMITS[q]
            r = must([PY, os.path.join(SRC, "tests", "e2e", "compare.py"), part, out] + limits)
            print(f"{q} {n} tokens: {r.stdout.strip()}", flush=True)
            os.remove(out)
        os.remove(path)


def case_packcache(a, model: str) -> None:
    """--pack-cache: the first start packs and writes the cache, the next maps it, and the
    logits are bit-identical to a start without it; a stale (model file touched), foreign (bad
    magic) or truncated cache is detected and rewritten; an unwritable directory is only a note."""
    d = os.path.join(a.work, "pack-cache")
    shutil.rmtree(d, ignore_errors=True)
    path = mlb(a.work, model, "q8_0")
    ids = ",".join(map(str, prompt_ids(a.work, model)[:8]))
    exe = os.path.join(a.bin, "ml_run")

    def go(tag: str, cache: str | None, expect: str) -> np.ndarray:
        out = os.path.join(a.work, f"pc-{tag}.npy")
        r = must(
            [exe, "-m", path, "--tokens", ids, "--logits", out]
            + (["--pack-cache", cache] if cache else [])
        )
        if expect not in r.stderr:
            raise SystemExit(f"FAILED: {tag}: expected {expect!r} on stderr, got {r.stderr!r}")
        print(f"ok: {tag}: {r.stderr.strip().splitlines()[0]}")
        return np.load(out)

    base = go("none", None, "")
    same(base, go("write", d, "pack cache: wrote"), "first start with --pack-cache")
    same(base, go("map", d, "pack cache: mapped"), "second start maps the cache")
    (cache_file,) = [os.path.join(d, f) for f in os.listdir(d)]
    os.utime(path)
    same(base, go("stale", d, "(stale: source_mtime_ns"), "model file touched")
    with open(cache_file, "r+b") as f:
        f.write(b"XXXX")
    same(base, go("foreign", d, "(foreign: not a Krafla pack cache"), "bad magic")
    os.truncate(cache_file, os.path.getsize(cache_file) // 2)
    same(base, go("truncated", d, "(foreign: "), "truncated cache")
    same(base, go("remap", d, "pack cache: mapped"), "rewritten cache maps again")
    with open(cache_file, "r+b") as f:  # a cache packed for another ISA (its header says so)
        head = f.read(4096)
        isa = head.split(b'"isa":"')[1].split(b'"')[0]
        f.seek(head.index(b'"isa":"' + isa) + 7)
        f.write(b"Z" * len(isa))
    same(base, go("other-isa", d, f"(foreign: isa is \"{'Z' * len(isa)}\""), "cache of another ISA")
    blocker = os.path.join(a.work, "pack-cache-blocker")
    open(blocker, "w").close()
    same(
        base,
        go("unwritable", os.path.join(blocker, "sub"), "pack cache: not written"),
        "unwritable dir",
    )
    env = dict(os.environ, KRAFLA_PACK_CACHE=d)
    r = must(
        [exe, "-m", path, "--tokens", ids, "--logits", os.path.join(a.work, "pc-env.npy")], env=env
    )
    assert "pack cache: mapped" in r.stderr, r.stderr


def same(x: np.ndarray, y: np.ndarray, what: str) -> None:
    if x.shape != y.shape or not np.array_equal(x.view(np.uint32), y.view(np.uint32)):
        raise SystemExit(f"FAILED: {what}: logits differ (max |Δ| {np.abs(x - y).max():.3g})")
    print(f"ok: {what}: bit-identical {x.shape}")


def same_across(a, model: str, quant: str, flag: str, base: int, others: tuple[int, ...]) -> None:
    """Bit-identical logits with `flag base` and with each `flag other`. Output names carry the
    model and quant: ctest -j runs cases side by side in one work dir."""

    def logits(v: int) -> np.ndarray:
        out = os.path.join(a.work, f"{model}-{quant}-{flag.lstrip('-')[0]}{v}.npy")
        return ml_run_logits(a, model, quant, [flag, str(v)], out)

    ref = logits(base)
    for v in others:
        same(ref, logits(v), f"{model}-{quant} {flag} {base} vs {flag} {v}")


def case_threads(a, model: str, quant: str) -> None:
    same_across(a, model, quant, "-t", 1, (2, 3, 4))


def case_batch(a, model: str, quant: str) -> None:
    same_across(a, model, quant, "--batch", 128, (1, 5, 16))


def corrupt_variants(good: bytes) -> dict[str, tuple[bytes, str]]:
    """name → (file bytes, a word the one-line error must contain)."""
    json_size = struct.unpack_from("<Q", good, 16)[0]
    meta = json.loads(good[24 : 24 + json_size])
    data_off = (24 + json_size + 63) // 64 * 64

    def with_meta(m: dict) -> bytes:
        js = json.dumps(m).encode()
        head = b"KRAFLAMB" + struct.pack("<IIQ", 1, 0, len(js)) + js
        head += b"\0" * ((-len(head)) % 64)
        return head + good[data_off:]

    def edit(fn) -> bytes:
        m = json.loads(json.dumps(meta))
        fn(m)
        return with_meta(m)

    def tensor(m: dict, name: str) -> dict:
        return next(t for t in m["tensors"] if t["name"] == name)

    return {
        "empty": (b"", "empty"),
        "short-header": (good[:10], "truncated"),
        "wrong-magic": (b"GGUF" + good[4:], "magic"),
        "newer-version": (good[:8] + struct.pack("<I", 99) + good[12:], "version"),
        "unknown-flags": (good[:12] + struct.pack("<I", 4) + good[16:], "flags"),
        "truncated-json": (good[: 24 + json_size // 2], "truncated"),
        "corrupt-json": (good[:24] + b"{" * 3 + good[27:], "JSON"),
        "truncated-data": (good[: len(good) - 1000], "not within"),
        "offset-past-end": (
            edit(lambda m: tensor(m, "blk.0.attn_q").update(offset=len(good) * 2 // 64 * 64)),
            "not within",
        ),
        "size-mismatch": (
            edit(lambda m: tensor(m, "blk.0.attn_q").update(shape=[8, 64])),
            "does not match",
        ),
        "unknown-dtype": (edit(lambda m: tensor(m, "blk.0.attn_q").update(dtype="q5_k")), "dtype"),
        "unknown-arch": (edit(lambda m: m["config"].update(arch="gpt-neox")), "architecture"),
        "missing-tensor": (
            edit(lambda m: m["tensors"].remove(tensor(m, "blk.1.ffn_down"))),
            "missing",
        ),
        "missing-config-key": (edit(lambda m: m["config"].pop("n_heads")), "n_heads"),
        "bad-heads": (edit(lambda m: m["config"].update(n_kv_heads=3)), "n_kv_heads"),
    }


def case_badfiles(a) -> None:
    good = open(mlb(a.work, "llama", "q8_0"), "rb").read()
    bad_dir = os.path.join(a.work, "bad")
    os.makedirs(bad_dir, exist_ok=True)
    failures = []
    for name, (data, word) in corrupt_variants(good).items():
        path = os.path.join(bad_dir, name + ".mlb")
        open(path, "wb").write(data)
        for exe, args in (
            ("ml_run", ["-m", path, "-p", "hi", "-n", "1"]),
            ("ml_bench", ["-m", path]),
            ("ml_tok", [path, "encode", "hi"]),
        ):
            if exe == "ml_tok" and name in (
                "unknown-arch",
                "missing-tensor",
                "missing-config-key",
                "bad-heads",
                "size-mismatch",
                "offset-past-end",
            ):
                continue  # the tokenizer alone is still readable from these
            r = run([os.path.join(a.bin, exe)] + args)
            lines = r.stderr.strip().splitlines()
            ok = (
                r.returncode == 2
                and len(lines) == 1
                and lines[0].startswith(f"{exe}: error:")
                and word.lower() in lines[0].lower()
            )
            print(
                f"{'ok' if ok else 'FAIL'}: {name} via {exe}: "
                f"rc={r.returncode} {r.stderr.strip()!r}"
            )
            if not ok:
                failures.append(f"{name}/{exe}")
    # Bad token ids and bad arguments are bad input too.
    for args, word in (
        (["--tokens", "1,99999999", "--logits", os.path.join(bad_dir, "x.npy")], "vocabulary"),
        (["--tokens", "1,x", "--logits", os.path.join(bad_dir, "x.npy")], "bad token id"),
        (["-p", "hi", "--batch", "0"], "batch"),
    ):
        r = run([os.path.join(a.bin, "ml_run"), "-m", mlb(a.work, "llama", "q8_0")] + args)
        ok = r.returncode == 2 and word.lower() in r.stderr.lower()
        print(
            f"{'ok' if ok else 'FAIL'}: ml_run {' '.join(args)}: "
            f"rc={r.returncode} {r.stderr.strip()!r}"
        )
        if not ok:
            failures.append(" ".join(args))
    r = run(
        [os.path.join(a.bin, "ml_tok"), mlb(a.work, "llama", "q8_0"), "decode", "5", "99999999"]
    )
    if not (r.returncode == 2 and "vocabulary" in r.stderr):
        failures.append(f"ml_tok decode of a bad id: rc={r.returncode} {r.stderr!r}")
    if failures:
        raise SystemExit("FAILED: " + ", ".join(failures))


def case_cli(a, model: str) -> None:
    path = mlb(a.work, model, "q8_0")
    exe = lambda n: os.path.join(a.bin, n)  # noqa: E731
    r = must([exe("ml_run"), "-m", path, "-p", "Hello world", "-n", "12", "--temp", "0"])
    assert r.stdout.startswith("Hello world"), r.stdout
    assert "generated: 12 tokens" in r.stderr or "generated:" in r.stderr, r.stderr
    # Greedy generation is deterministic: the same text twice, and for any thread count.
    r2 = must(
        [exe("ml_run"), "-m", path, "-p", "Hello world", "-n", "12", "--temp", "0", "-t", "1"]
    )
    assert r.stdout == r2.stdout, (r.stdout, r2.stdout)
    # Seeded sampling is reproducible.
    s1 = must([exe("ml_run"), "-m", path, "-p", "Once", "-n", "10", "--seed", "5"]).stdout
    s2 = must([exe("ml_run"), "-m", path, "-p", "Once", "-n", "10", "--seed", "5"]).stdout
    assert s1 == s2, (s1, s2)
    # ml_tok round trip on the model file.
    ids = must([exe("ml_tok"), path, "encode", "--no-special", "Hello world"]).stdout.split()
    assert ids and all(i.isdigit() for i in ids), ids
    text = must([exe("ml_tok"), path, "decode"] + ids).stdout
    assert text == "Hello world\n", repr(text)
    # The standalone tokenizer file (.mlt) tokenizes exactly as the model file does.
    mlt = os.path.join(a.work, f"{model}.mlt")
    must(tool("convert_tokenizer.py") + [os.path.join(a.work, model), "-o", mlt])
    for special in ([], ["--no-special"]):
        x = must([exe("ml_tok"), mlt, "encode"] + special + ["Hi there, 12345!"]).stdout
        y = must([exe("ml_tok"), path, "encode"] + special + ["Hi there, 12345!"]).stdout
        assert x == y and x.strip(), (x, y)
    # A two-turn chat over stdin keeps going and ends cleanly at EOF.
    tmpl = {"llama": "llama3", "mistral": "llama2"}.get(model, "auto")
    r = must(
        [exe("ml_run"), "-m", path, "--chat", tmpl, "-n", "8", "--temp", "0", "-v"],
        input="Hi there\nAnd again\n",
    )
    assert r.stderr.count("generated:") == 2, r.stderr
    if model == "qwen35":  # the Qwen3.5 template opens a think block; --think hide drops it
        show = must(
            [exe("ml_run"), "-m", path, "--chat", "auto", "-n", "8", "--temp", "0"],
            input="Hi there\n",
        )
        hide = must(
            [
                exe("ml_run"),
                "-m",
                path,
                "--chat",
                "auto",
                "-n",
                "8",
                "--temp",
                "0",
                "--think",
                "hide",
            ],
            input="Hi there\n",
        )
        assert "qwen3.5 template" in show.stderr and show.stdout.startswith("<think>"), show
        assert "<think>" not in hide.stdout, hide.stdout
    # ml_bench: llama-bench's JSON, a pp and a tg test per thread count.
    r = must(
        [exe("ml_bench"), "-m", path, "-p", "16", "-n", "4", "-t", "1,2", "-r", "1", "-o", "json"]
    )
    rows = json.loads(r.stdout)
    assert [(x["n_threads"], x["test"]) for x in rows] == [
        (1, "pp16"),
        (1, "tg4"),
        (2, "pp16"),
        (2, "tg4"),
    ], rows
    assert all(x["avg_ts"] > 0 and len(x["samples_ns"]) == 1 for x in rows), rows
    print("ok: cli", model)


def case_bench(a, model: str) -> None:
    """ml_bench's four output formats, the statistics against the samples, errors by option."""
    path = mlb(a.work, model, "q8_0")
    bench = [os.path.join(a.bin, "ml_bench"), "-m", path]
    common = ["-p", "8,16", "-n", "3", "-t", "1,2", "-r", "3"]
    rows = json.loads(must(bench + common + ["-o", "json"]).stdout)
    want = [(t, name) for t in (1, 2) for name in ("pp8", "pp16", "tg3")]
    assert [(x["n_threads"], x["test"]) for x in rows] == want, rows
    meta = read_meta(path)
    weights = [t for t in meta["tensors"] if t["dtype"] != "bytes"]
    for x in rows:
        n_tok = x["n_prompt"] + x["n_gen"]
        assert len(x["samples_ns"]) == len(x["samples_ts"]) == 3, x
        ts = [n_tok * 1e9 / ns for ns in x["samples_ns"]]
        assert np.allclose(ts, x["samples_ts"]) and np.isclose(x["avg_ts"], np.mean(ts)), x
        assert np.isclose(x["stddev_ts"], np.std(ts, ddof=1)), x
        assert abs(x["avg_ns"] - np.mean(x["samples_ns"])) <= 1, x
        assert x["model_size"] == sum(t["size"] for t in weights), x
        assert x["model_n_params"] == sum(int(np.prod(t["shape"])) for t in weights), x
        assert x["model_arch"] == meta["config"]["arch"] and x["n_batch"] == 128, x
    # jsonl: the same tests one object a line; csv: the scalar fields, every cell quoted.
    lines = must(bench + common + ["-o", "jsonl"]).stdout.splitlines()
    assert [json.loads(ln)["test"] for ln in lines] == [name for _, name in want], lines
    lines = must(bench + common + ["-o", "csv"]).stdout.splitlines()
    table = list(csv.reader(lines))
    assert table[0] == [k for k, v in rows[0].items() if not isinstance(v, list)], table[0]
    assert [r[table[0].index("test")] for r in table[1:]] == [name for _, name in want], table
    assert all(len(r) == len(table[0]) for r in table), table
    assert all(
        ln.startswith('"') and ln.endswith('"') and ln.count('","') == len(table[0]) - 1
        for ln in lines[1:]
    ), lines
    # md: llama-bench's columns; the header, the rule and every row have their '|' in one place.
    md = must(bench + ["-p", "8", "-n", "2", "-t", "1", "-r", "2"]).stdout.splitlines()
    table = [ln for ln in md if ln.startswith("|")]
    assert [c.strip() for c in table[0].strip("|").split("|")] == [
        "model",
        "size",
        "params",
        "isa",
        "threads",
        "test",
        "t/s",
    ], table
    bars = [[i for i, ch in enumerate(ln) if ch == "|"] for ln in table]
    assert len(table) == 4 and all(b == bars[0] for b in bars), table
    assert "pp8" in table[2] and "tg2" in table[3] and " ± " in table[2], table
    assert any(ln.startswith("build: ml_bench ") for ln in md), md
    # A test longer than the context is shortened to fit and says so (where the context is small
    # enough to fill: the depth is evaluated before each repetition).
    ctx = meta["config"]["max_ctx"]
    if ctx <= 4096:
        r = must(
            bench + ["-p", "16", "-n", "0", "-d", str(ctx - 4), "-t", "1", "-r", "1", "-o", "json"]
        )
        assert json.loads(r.stdout)[0]["test"] == f"pp4 @ d{ctx - 4}", r.stdout
        assert "does not fit" in r.stderr, r.stderr
    # Bad options: one line naming the option, exit 2.
    for args, word in (
        (["-t", "x"], "--threads"),
        (["-t", "1,0"], "--threads"),
        (["-p", "-1"], "--n-prompt"),
        (["-o", "xml"], "--output"),
        (["-r", "0"], "--repetitions"),
        (["-b", "0"], "--batch"),
        (["-d", str(ctx)], "context"),
    ):
        r = run(bench + args)
        lines = [ln for ln in r.stderr.splitlines() if "loaded in" not in ln]
        assert (
            r.returncode == 2
            and len(lines) == 1
            and word in lines[0]
            and lines[0].startswith("ml_bench: error:")
        ), (args, r.returncode, r.stderr)
    print("ok: bench", model)


def read_meta(path: str) -> dict:
    with open(path, "rb") as f:
        head = f.read(24)
        return json.loads(f.read(struct.unpack_from("<Q", head, 16)[0]))


def check_info_config(cfg: dict, got: dict) -> None:
    """The dump's config against the file's, key by key; absent keys as the loader defaults them."""
    for k, v in cfg.items():
        if isinstance(v, float) or (isinstance(v, list) and v and isinstance(v[0], float)):
            assert np.allclose(np.float32(v), np.float32(got[k]), rtol=1e-6), (k, v, got[k])
        else:
            assert got[k] == v, (k, v, got[k])
    n = cfg["n_layers"]
    assert got["rope_dim"] == cfg.get("rope_dim", cfg["head_dim"]), got["rope_dim"]
    assert got["layer_window"] == cfg.get("layer_window", [cfg.get("sliding_window", 0)] * n)
    assert got["layer_rope"] == cfg.get("layer_rope", [True] * n)


def case_info(a, model: str) -> None:
    """ml_tok info against the .mlb read independently here (header, metadata, tensor table)."""
    path = mlb(a.work, model, "q4_0")
    tok = os.path.join(a.bin, "ml_tok")
    raw = open(path, "rb").read()
    version, _, json_size = struct.unpack_from("<IIQ", raw, 8)
    meta = json.loads(raw[24 : 24 + json_size])
    info = json.loads(must([tok, "info", path, "--json"]).stdout)
    assert (info["version"], info["kind"], info["file_size"], info["data_offset"]) == (
        version,
        "model",
        len(raw),
        (24 + json_size + 63) // 64 * 64,
    ), info
    assert info["source"] == meta["source"], info["source"]
    check_info_config(meta["config"], info["config"])
    want = [(t["name"], t["dtype"], t["shape"], t["offset"], t["size"]) for t in meta["tensors"]]
    got = [(t["name"], t["dtype"], t["shape"], t["offset"], t["bytes"]) for t in info["tensors"]]
    assert got == want, (got[:3], want[:3])
    totals: dict = {}
    for t in meta["tensors"]:
        x = totals.setdefault(t["dtype"], {"tensors": 0, "elements": 0, "bytes": 0})
        x["tensors"] += 1
        x["elements"] += int(np.prod(t["shape"]))
        x["bytes"] += t["size"]
    assert info["totals"] == totals, (info["totals"], totals)
    assert info["n_params"] == sum(x["elements"] for d, x in totals.items() if d != "bytes")
    tj = json.loads(mlbfile.MlbReader(path).raw("tokenizer.json"))
    kind = "byte-level BPE" if (tj.get("decoder") or {}).get("type") == "ByteLevel" else None
    assert info["tokenizer"]["n_added"] == len(tj.get("added_tokens", [])), info["tokenizer"]
    assert kind is None or info["tokenizer"]["kind"] == kind, info["tokenizer"]
    # The readable dump: every tensor on a line with its dtype and shape, the chat template.
    text = must([tok, "info", path]).stdout
    rows = {
        ln.split()[1]: ln
        for ln in text.splitlines()
        if len(ln.split()) > 5 and ln.split()[0].isdigit()
    }
    for name, dtype, shape, offset, size in want:
        ln = rows[name]
        assert f" {dtype} " in ln and f"[{', '.join(map(str, shape))}]" in ln, ln
        assert ln.split()[-2:] == [str(size), str(offset)], ln
    tmpl = meta["config"]["chat_template"] or "none recorded"
    assert any(ln.split(None, 1) == ["chat_template", tmpl] for ln in text.splitlines()), text[
        :2000
    ]
    # The other order (ml_tok FILE info) and a tokenizer file.
    assert must([tok, path, "info", "--json"]).stdout == must([tok, "info", path, "--json"]).stdout
    mlt = os.path.join(a.work, f"{model}-info.mlt")
    must(tool("convert_tokenizer.py") + [os.path.join(a.work, model), "-o", mlt])
    t_info = json.loads(must([tok, "info", mlt, "--json"]).stdout)
    assert (
        t_info["kind"] == "tokenizer" and "config" not in t_info and t_info["n_params"] == 0
    ), t_info
    # Corrupt files: one line naming the problem, exit 2 (config errors too: info parses it).
    bad_dir = os.path.join(a.work, f"bad-info-{model}")  # one per case: they run at once
    os.makedirs(bad_dir, exist_ok=True)
    variants = corrupt_variants(
        open(mlb(a.work, "llama", "q8_0"), "rb").read()
    )  # names llama's tensors
    for name in (
        "empty",
        "wrong-magic",
        "truncated-json",
        "truncated-data",
        "size-mismatch",
        "unknown-dtype",
        "unknown-arch",
        "missing-config-key",
    ):
        data, word = variants[name]
        p = os.path.join(bad_dir, name + ".mlb")
        open(p, "wb").write(data)
        r = run([tok, "info", p])
        lines = r.stderr.strip().splitlines()
        assert (
            r.returncode == 2
            and len(lines) == 1
            and lines[0].startswith("ml_tok: error:")
            and word.lower() in lines[0].lower()
            and not r.stdout
        ), (name, r.returncode, r.stderr)
    print("ok: info", model)


# The e2e models' tokenizers and the fixture of the same tokenizer (tests/tokenizer).
TOK_FIXTURE = {"llama": "llama3", "qwen3": "qwen3"}


def case_tok(a, model: str) -> None:
    """ml_tok encode's --no-parse-special (ids from the tokenizer fixtures' reference), --count and
    --show-pieces."""
    path = mlb(a.work, model, "q8_0")
    tok = [os.path.join(a.bin, "ml_tok"), path]
    fdir = os.path.join(SRC, "tests", "tokenizer")
    texts = json.load(open(os.path.join(fdir, "texts.json"), encoding="utf-8"))
    cases = json.load(open(os.path.join(fdir, "fixtures", TOK_FIXTURE[model] + ".json")))["cases"]
    nps = [(t, c) for t, c in zip(texts, cases) if "plain_nps" in c]
    assert nps, "the fixture has no special-token texts"
    for text, c in nps:
        parsed = must(tok + ["encode", "--no-special", text]).stdout.split()
        plain = must(tok + ["encode", "--no-special", "--no-parse-special", text]).stdout.split()
        assert list(map(int, parsed)) == c["plain"], (text, parsed)
        assert list(map(int, plain)) == c["plain_nps"], (text, plain, c["plain_nps"])
    text = "Hello world, <|im_start|> café 😀 ∑"
    ids = must(tok + ["encode", text]).stdout.split()
    assert must(tok + ["encode", "--count", text]).stdout == f"{len(ids)}\n"
    # --show-pieces: "ID -> 'PIECE'" a line, the piece's bytes as they are (maybe part of a
    # character), so read bytes; byte-level pieces without the special tokens spell the text.
    for special, want_ids in (([], ids), (["--no-special"], None)):
        r = subprocess.run(tok + ["encode", "--show-pieces", *special, text], capture_output=True)
        rows = [ln.split(b" -> ", 1) for ln in r.stdout.split(b"\n") if ln]
        assert r.returncode == 0 and all(
            p.startswith(b"'") and p.endswith(b"'") for _, p in rows
        ), r
        if want_ids:
            assert [i.strip().decode() for i, _ in rows] == want_ids, rows
        else:
            assert b"".join(p[1:-1] for _, p in rows) == text.encode(), rows
    r = run(tok + ["encode", "--count", "--show-pieces", "x"])
    assert (
        r.returncode == 2 and r.stderr.startswith("ml_tok: error:") and "--count" in r.stderr
    ), r.stderr
    print("ok: tok", model)


def case_llama2c(a) -> None:
    d = os.path.join(a.work, "l2c")
    ck = os.path.join(a.work, "l2c.bin")
    must(
        tool("gen_random.py")
        + [
            "--arch",
            "llama",
            "--shape",
            "tiny",
            "--tokenizer",
            "llama2",
            "--seed",
            "3",
            "-o",
            d,
            "--llama2c-out",
            ck,
        ]
    )
    out = os.path.join(a.work, "l2c.mlb")
    must(tool("convert.py") + ["llama2c", ck, d, "-o", out, "--quant", "f32"])
    ids = "1,450,4996,17354,1701"
    ref = os.path.join(a.work, "l2c-ref.npy")
    must(tool("ref_forward.py") + [d, "--tokens", ids, "--out", ref])
    test = os.path.join(a.work, "l2c-krafla.npy")
    must([os.path.join(a.bin, "ml_run"), "-m", out, "--tokens", ids, "--logits", test])
    print(
        must(
            [PY, os.path.join(SRC, "tests", "e2e", "compare.py"), ref, test] + LIMITS["f32"]
        ).stdout
    )


# The CPU guard, under qemu-user. Each case is (CPU model, feature): on a model that lacks part
# of the build's ISA every executable exits 3 with one message naming the first missing feature;
# feature None means the model has all of it (for sse2: the oldest x86-64 model, Opteron_G1,
# which has no SSE3) and the guard must let the executable through to its ordinary error about
# the missing file (exit 2).
GUARD_CPU = {
    "avx512vnni": [("Haswell", "avx512f")],
    "avxvnni": [("Nehalem", "avx"), ("Haswell", "avxvnni")],
    "avx2": [("Nehalem", "avx"), ("Haswell", None)],
    "sse41": [("core2duo", "sse4.1"), ("Nehalem", None)],
    "sse2": [("Opteron_G1", None)],
}


def case_guard(a, isa: str) -> None:
    for cpu, feature in GUARD_CPU[isa]:
        for exe, args in (
            ("ml_run", ["-m", "x.mlb", "-p", "hi"]),
            ("ml_tok", ["x.mlt", "encode", "hi"]),
            ("ml_bench", ["-m", "x.mlb"]),
        ):
            r = run(["qemu-x86_64", "-cpu", cpu, os.path.join(a.bin, exe)] + args)
            err = [ln for ln in r.stderr.splitlines() if not ln.startswith("qemu-x86_64: warning")]
            if feature is None:
                ok = (
                    r.returncode == 2
                    and len(err) == 1
                    and "x.ml" in err[0]
                    and "lacks" not in err[0]
                )
            else:
                ok = r.returncode == 3 and len(err) == 1 and f"lacks {feature}," in err[0]
            if not ok:
                raise SystemExit(f"FAILED: {exe} under -cpu {cpu}: rc={r.returncode} {r.stderr!r}")
            print(f"ok: {exe} under -cpu {cpu}: rc={r.returncode}: {err[0]}")


# Arm builds under qemu-user CPU models that lack part of their ISA (cortex-a53/a57: Armv8.0;
# cortex-a76: dotprod without i8mm; cortex-a8: ARMv7 NEON without VFPv4): exit 3 and one message
# naming the first missing feature as /proc/cpuinfo does.
ARM_GUARD_CPU = {
    "sve": [("cortex-a57", "sve")],
    "i8mm": [("cortex-a53", "asimddp"), ("cortex-a76", "i8mm")],
    "dotprod": [("cortex-a53", "asimddp")],
    "neon32": [("cortex-a8", "vfpv4")],
}


def case_arm_guard(a, isa: str) -> None:
    qemu = EMULATOR[0]  # qemu-aarch64 or qemu-arm, from the build's emulator
    for cpu, feature in ARM_GUARD_CPU[isa]:
        for exe, args in (
            ("ml_run", ["-m", "x.mlb", "-p", "hi"]),
            ("ml_tok", ["x.mlt", "encode", "hi"]),
            ("ml_bench", ["-m", "x.mlb"]),
        ):
            r = run([qemu, "-cpu", cpu, os.path.join(a.bin, exe)] + args)
            err = [
                ln
                for ln in r.stderr.splitlines()
                if not ln.startswith(os.path.basename(qemu) + ":")
            ]
            if not (r.returncode == 3 and len(err) == 1 and f"lacks {feature}," in err[0]):
                raise SystemExit(f"FAILED: {exe} under -cpu {cpu}: rc={r.returncode} {r.stderr!r}")
            print(f"ok: {exe} under -cpu {cpu}: {err[0]}")


# SVE builds are vector-length agnostic. At every vector length qemu offers (not only powers of
# two; the row tile is one vector, 4 to 64 rows) the logits match the numpy reference, and
# --batch 1 and --batch 5 (groups of 4 tokens and 1) give the same bits. Across lengths only the
# matmuls are bit-identical: dot_f32, rmsnorm and softmax sum VL lanes, so the last bits differ.
SVE_VLS = (128, 256, 384, 512, 1024, 2048)


def case_sve_vl(a, model: str, quant: str) -> None:
    ids = ",".join(map(str, prompt_ids(a.work, model)))
    ref = os.path.join(a.work, f"{model}-ref.npy")
    for vl in SVE_VLS:
        got = []
        for batch in (1, 5):
            out = os.path.join(a.work, f"{model}-{quant}-vl{vl}-b{batch}.npy")
            must(
                [
                    "qemu-aarch64",
                    "-cpu",
                    f"max,sve-default-vector-length={vl // 8}",
                    os.path.join(a.bin, "ml_run"),
                    "-m",
                    mlb(a.work, model, quant),
                    "--tokens",
                    ids,
                    "--batch",
                    str(batch),
                    "-t",
                    "2",
                    "--logits",
                    out,
                ]
            )
            got.append(np.load(out))
        same(got[0], got[1], f"{model}-{quant} VL {vl}: --batch 1 vs --batch 5")
        r = must([PY, os.path.join(SRC, "tests", "e2e", "compare.py"), ref, out] + LIMITS[quant])
        print(f"VL {vl}: {r.stdout.strip()}")


def main() -> None:
    global EMULATOR, BIN_DIR
    p = argparse.ArgumentParser()
    p.add_argument("--bin", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--emulator", default="", help="command prefix for the built executables")
    p.add_argument("case")
    a = p.parse_args()
    EMULATOR, BIN_DIR = a.emulator.split(), os.path.abspath(a.bin)
    kind, *rest = a.case.split(":")
    {
        "setup": case_setup,
        "logits": case_logits,
        "threads": case_threads,
        "batch": case_batch,
        "lengths": case_lengths,
        "big": case_big,
        "actquant": case_actquant,
        "packcache": case_packcache,
        "badfiles": case_badfiles,
        "cli": case_cli,
        "llama2c": case_llama2c,
        "guard": case_guard,
        "bench": case_bench,
        "info": case_info,
        "tok": case_tok,
        "armguard": case_arm_guard,
        "svevl": case_sve_vl,
    }[kind](a, *rest)


if __name__ == "__main__":
    main()
