"""End-to-end quality checks on the trained model (models/brown-llama, scripts/train_tiny.py):
perplexity on the held-out Brown text against the numpy reference, and what quantization costs.
"""
from __future__ import annotations

import json
import os
import re

import numpy as np

from e2e_common import SRC, mlb, must, reference, run, tool

MODEL = os.path.join(SRC, "models", "brown-llama")
TEXT = os.path.join(SRC, "data", "brown-test.txt")
CTX = 256
REF_CHUNKS = 2  # the numpy forward's share: a fixed stretch of the text
CHUNKS = 16  # the quantization comparisons: 16 x 255 predictions


def convert(a, quant: str, *extra: str) -> str:
    name = "-".join(["brown", quant, *[e.lstrip("-") for e in extra]])
    out = os.path.join(a.scratch, f"{name}.mlb")
    if not os.path.exists(out):
        must(tool("convert.py") + [MODEL, "-o", out, "--quant", quant, *extra])
    return out


def perplexity(a, path: str, chunks: int, *extra: str) -> dict:
    cmd = [os.path.join(a.bin, "ml_run"), "-m", path, "-q", "--perplexity", TEXT, "--json"]
    r = must(cmd + ["-c", str(CTX), "--chunks", str(chunks), *extra])
    return json.loads(r.stdout)


def case_quality(a) -> None:
    """F32 perplexity of the first chunks equals the numpy reference's (1e-4 relative), with
    both scorings; Q8_0 is within 1% of F32; Q4_0 with the fitted scales is no worse than with
    llama.cpp's rounding rule, and with an importance matrix closer to F32 (KL) than without;
    --kv f16 / q8_0 within 0.5% / 2% of the F32 cache."""
    if not os.path.exists(TEXT):
        raise SystemExit(f"missing {TEXT}")
    f32 = convert(a, "f32")
    ids = must([os.path.join(a.bin, "ml_tok"), f32, "encode", "-"], input=open(TEXT).read())
    ids_file = os.path.join(a.scratch, "brown-test.ids")
    with open(ids_file, "w") as f:
        f.write(ids.stdout)
    bos = ids.stdout.split()[0]
    for scoring in ("all", "llama"):
        ref = json.loads(
            must(
                reference("ref_perplexity.py")
                + [MODEL, "--tokens-file", ids_file, "--ctx", str(CTX), "--bos", bos]
                + ["--chunks", str(REF_CHUNKS), "--scoring", scoring]
            ).stdout
        )
        got = perplexity(a, f32, REF_CHUNKS, "--ppl-scoring", scoring)
        rel = abs(got["ppl"] - ref["ppl"]) / ref["ppl"]
        print(f"{scoring}: ppl {got['ppl']:.5f}, numpy {ref['ppl']:.5f}, rel {rel:.2e}")
        assert got["predictions"] == ref["predictions"], (got, ref)
        assert rel < 1e-4, (got, ref)
    ppl = {"f32": perplexity(a, f32, CHUNKS)["ppl"]}
    ppl["q8_0"] = perplexity(a, convert(a, "q8_0"), CHUNKS)["ppl"]
    for rule in ("fit", "round"):
        ppl[f"q4_0 {rule}"] = perplexity(a, convert(a, "q4_0", "--q4-rule", rule), CHUNKS)["ppl"]
    print("perplexity over", CHUNKS, "chunks:", {k: round(v, 4) for k, v in ppl.items()})
    assert abs(ppl["q8_0"] / ppl["f32"] - 1) < 0.01, ppl
    assert ppl["q4_0 fit"] <= ppl["q4_0 round"], ppl
    # The importance matrix, made from the text's second half (the scored chunks are in its
    # first): the Q4_0 fit weighted by it is closer to F32. Measured by the KL divergence: over
    # 16 chunks every Q4_0 file's perplexity is within noise of F32's, the KL is not.
    text = open(TEXT, encoding="utf-8").read()
    half = os.path.join(a.scratch, "brown-test-second-half.txt")
    with open(half, "w", encoding="utf-8") as f:
        f.write(text[len(text) // 2 :])
    imat = os.path.join(a.scratch, "brown.imatrix")  # new: ml_run --imatrix adds to a file
    ml = [os.path.join(a.bin, "ml_run"), "-m", f32, "-q", "--perplexity", half, "-c", str(CTX)]
    must(ml + ["--imatrix", imat])
    weighted = os.path.join(a.scratch, "brown-q4_0-imatrix.mlb")
    must(tool("convert.py") + [MODEL, "-o", weighted, "--quant", "q4_0", "--imatrix", imat])
    base = os.path.join(a.scratch, "brown-f32.kld")
    perplexity(a, f32, CHUNKS, "--kl-divergence-base", base)
    kl = {
        name: perplexity(a, path, CHUNKS, "--kl-divergence-base", base, "--kl-divergence")["kl"]
        for name, path in (("fit", convert(a, "q4_0", "--q4-rule", "fit")), ("imatrix", weighted))
    }
    print("KL to F32:", {k: round(v["mean"], 6) for k, v in kl.items()})
    assert kl["imatrix"]["mean"] <= kl["fit"]["mean"], kl
    for kv, tol in (("f16", 0.005), ("q8_0", 0.02)):
        got = perplexity(a, f32, CHUNKS, "--kv", kv)["ppl"]
        print(f"--kv {kv}: ppl {got:.4f} (f32 cache {ppl['f32']:.4f})")
        assert abs(got / ppl["f32"] - 1) < tol, (kv, got, ppl)
    print("ok: quality")


def case_imatrix(a, model: str) -> None:
    """ml_run --imatrix: the first layer's q-projection input statistics equal numpy's
    rmsnorm(embedding rows) * attn_norm summed over the prompt; a second run accumulates
    (exactly twice the sums); the file reads back with tools/convert/imatrix.py; a truncated file is
    refused by ml_run and convert.py with one line; convert.py --imatrix changes the Q4_0 fits."""
    from convert import imatrix
    from convert import safetensors_io as st

    work = a.scratch
    path = os.path.join(work, "im.dat")
    f32 = mlb(a.work, model, "f32")
    prompt = "The quick brown fox jumps over the lazy dog, twice."
    ids = [
        int(t) for t in must([os.path.join(a.bin, "ml_tok"), f32, "encode", prompt]).stdout.split()
    ]
    ml = [os.path.join(a.bin, "ml_run"), "-m", f32, "-q", "-p", prompt, "-n", "0"]
    must(ml + ["--imatrix", path])
    first, tokens = imatrix.read(path)
    assert tokens == len(ids), (tokens, ids)
    hf = os.path.join(a.work, model)
    cfg = json.load(open(os.path.join(hf, "config.json")))
    ck = st.Checkpoint(hf)
    emb = ck.get("model.embed_tokens.weight").astype(np.float64)[ids]
    w = ck.get("model.layers.0.input_layernorm.weight").astype(np.float64)
    h = emb / np.sqrt((emb * emb).mean(axis=1, keepdims=True) + cfg["rms_norm_eps"]) * w
    want = (h * h).sum(axis=0)
    got = first["blk.0.attn_q"]
    assert got.rows == len(ids), got.rows
    rel = np.abs(got.sum2 - want).max() / np.abs(want).max()
    print(f"blk.0.attn_q: {len(ids)} rows, max rel error {rel:.2e} against numpy")
    assert rel < 1e-5, rel
    assert first["blk.0.attn_k"].sum2.tolist() == got.sum2.tolist()  # the same input
    assert first["output"].rows == 1  # only the last position's logits are computed
    must(ml + ["--imatrix", path])
    second, tokens2 = imatrix.read(path)
    assert tokens2 == 2 * len(ids) and set(second) == set(first)
    for name, e in first.items():
        assert second[name].rows == 2 * e.rows
        assert np.allclose(second[name].sum2, 2 * e.sum2, rtol=1e-12, atol=0), name
    cut = os.path.join(work, "cut.dat")
    with open(path, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(os.path.getsize(path) - 100))
    for cmd in (
        ml + ["--imatrix", cut],
        tool("convert.py")
        + [hf, "-o", os.path.join(work, "x.mlb"), "--quant", "q4_0"]
        + ["--imatrix", cut],
    ):
        r = run(cmd)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and "truncated imatrix" in lines[0], r.stderr
    plain, weighted = os.path.join(work, "plain.mlb"), os.path.join(work, "weighted.mlb")
    must(tool("convert.py") + [hf, "-o", plain, "--quant", "q4_0"])
    must(tool("convert.py") + [hf, "-o", weighted, "--quant", "q4_0", "--imatrix", path])
    assert open(plain, "rb").read() != open(weighted, "rb").read()
    print("ok: imatrix", model)


def case_imatrix_moe(a, model: str) -> None:
    """ml_run --imatrix on a MoE model: one entry per expert a prompt token was routed to
    ("blk.N.ffn_gate_exps.E"), whose rows over a layer's experts add up to k per token; gate and
    up of an expert see the same rows; the dense layer keeps its ffn_* entries; convert.py
    --imatrix then weights each expert's Q4_0 fit by its own entry (the file changes)."""
    from convert import imatrix

    work = a.scratch
    path = os.path.join(work, "im.dat")
    f32 = mlb(a.work, model, "f32")
    hf = os.path.join(a.work, model)
    cfg = json.load(open(os.path.join(hf, "config.json")))
    prompt = "The quick brown fox jumps over the lazy dog, twice, and then once more."
    must(
        [os.path.join(a.bin, "ml_run"), "-m", f32, "-q", "-p", prompt, "-n", "0"]
        + ["--imatrix", path]
    )
    entries, tokens = imatrix.read(path)
    k, n_exp = cfg["num_experts_per_tok"], cfg["num_experts"]
    sparse = [i not in cfg["mlp_only_layers"] for i in range(cfg["num_hidden_layers"])]
    for i, moe in enumerate(sparse):
        if not moe:
            assert f"blk.{i}.ffn_gate" in entries and f"blk.{i}.ffn_gate_exps.0" not in entries
            continue
        rows = 0
        for e in range(n_exp):
            g, u, d = (entries.get(f"blk.{i}.ffn_{p}_exps.{e}") for p in ("gate", "up", "down"))
            assert (g is None) == (u is None) == (d is None), (i, e)
            if g is None:
                continue
            assert g.rows == u.rows == d.rows and g.sum2.tolist() == u.sum2.tolist(), (i, e)
            rows += g.rows
        assert rows == k * tokens, (i, rows, k, tokens)
    print(f"ok: {model}: {tokens} tokens, {k} expert rows each, in every sparse layer")
    plain, weighted = os.path.join(work, "plain.mlb"), os.path.join(work, "weighted.mlb")
    must(tool("convert.py") + [hf, "-o", plain, "--quant", "q4_0"])
    r = must(tool("convert.py") + [hf, "-o", weighted, "--quant", "q4_0", "--imatrix", path])
    note = re.search(r"no entry for [^\n]*", r.stderr)
    assert not note or "_exps" not in note.group(0), note.group(0)
    assert open(plain, "rb").read() != open(weighted, "rb").read()
    print("ok: imatrix", model)


def case_lookup(a) -> None:
    """ml_run --lookup (speculative decoding by prompt lookup) prints the same text as plain
    decoding, greedy and sampled, on the trained model (whose text repeats, so drafts are
    accepted: the stats line says how many), a random Llama, a sliding-window Gemma 3 (to the end
    of a small context) and Qwen3.5 (DeltaNet: lookup is left off, no stats line)."""
    brown = convert(a, "q8_0")
    prompt = "The jury said it did not find that many of the voters were in favor of the plan."
    runs = [
        (brown, ["--temp", "0", "-n", "200"], True),
        (
            brown,
            ["--temp", "0.7", "--top-k", "40", "--repeat-penalty", "1.1", "-s", "7", "-n", "150"],
            False,
        ),
        (mlb(a.work, "llama", "q8_0"), ["--temp", "0", "-n", "120"], False),
        (
            mlb(a.work, "gemma3", "q4_0"),
            ["--temp", "0.9", "-s", "3", "-c", "96", "-n", "150"],
            False,
        ),
        (mlb(a.work, "qwen35", "q8_0"), ["--temp", "0", "-n", "40"], False),
    ]
    for path, args, must_accept in runs:
        cmd = [os.path.join(a.bin, "ml_run"), "-m", path, "-p", prompt, "-t", "2", *args]
        plain, fast = must(cmd), must(cmd + ["--lookup", "6"])
        name = os.path.basename(path)
        same_text(name, args, plain, fast, "lookup", "--lookup is off for this model", must_accept)


def same_text(name, args, plain, fast, kind: str, off_note: str, must_accept: bool) -> None:
    """The run with speculative decoding `kind` ("lookup" or "draft") printed the plain run's
    text and one stats line ("KIND: A of D drafted tokens accepted …", A > 0 when must_accept);
    on Qwen3.5 (DeltaNet) it was left off with `off_note` and no stats line."""
    if fast.stdout != plain.stdout:
        raise SystemExit(f"FAILED: {name} {args}: --{kind} changed the text")
    stats = [ln for ln in fast.stderr.splitlines() if ln.startswith(f"{kind}:")]
    if "qwen35" in name:
        assert not stats and off_note in fast.stderr, fast.stderr
    else:
        assert len(stats) == 1, fast.stderr
        accepted = int(stats[0].split()[1])
        assert accepted > 0 or not must_accept, stats
    print(f"ok: {name} {' '.join(args)}: same text; {stats[0] if stats else f'no {kind}'}")


def case_draft(a) -> None:
    """ml_run --draft MODEL (speculative decoding with a draft model, checked by the standard
    rule) prints the same text as plain decoding at temperature 0: the trained model (F32)
    drafted by its Q4_0 copy (one-shot and chat), random Llama and sliding-window Gemma 3 models
    to the end of a small context; sampling runs and keeps drafts (its distribution is the unit
    tests' SampleDraft.*); Qwen3.5 leaves it off; a draft with another vocabulary, --draft with
    --lookup and a bad --draft-max are refused (exit 2, one line)."""
    brown, brown_q4 = convert(a, "f32"), convert(a, "q4_0")
    llama_q4, gemma_q4 = mlb(a.work, "llama", "q4_0"), mlb(a.work, "gemma3", "q4_0")
    prompt = "The jury said it did not find that many of the voters were in favor of the plan."
    greedy = [
        (brown, brown_q4, ["-n", "200"], True),
        (brown, brown_q4, ["-n", "120", "--draft-max", "3", "--draft-p-min", "0"], True),
        (brown, brown_q4, ["-n", "60", "--chat", "llama2", "-v"], False),
        (mlb(a.work, "llama", "q8_0"), llama_q4, ["-n", "120", "--draft-p-min", "0"], False),
        (
            mlb(a.work, "gemma3", "q8_0"),
            gemma_q4,
            ["-c", "96", "-n", "150", "--draft-p-min", "0"],
            False,
        ),
        (mlb(a.work, "qwen35", "q8_0"), mlb(a.work, "qwen35", "q4_0"), ["-n", "40"], False),
    ]
    ml_run = os.path.join(a.bin, "ml_run")
    for path, draft, args, must_accept in greedy:
        cmd = [ml_run, "-m", path, "-p", prompt, "-t", "2", "--temp", "0"]
        plain = must(cmd + strip_draft_args(args))
        fast = must(cmd + args + ["--draft", draft])
        name = f"{os.path.basename(path)} drafted by {os.path.basename(draft)}"
        same_text(name, args, plain, fast, "draft", "--draft is off", must_accept)
    # Sampling: drafts from the Q4_0 copy are mostly kept (its distribution is close).
    r = must(
        [
            ml_run,
            "-m",
            brown,
            "-p",
            prompt,
            "-t",
            "2",
            "--temp",
            "0.8",
            "-s",
            "5",
            "-n",
            "150",
            "--draft",
            brown_q4,
            "--draft-p-min",
            "0",
        ]
    )
    stats = [ln for ln in r.stderr.splitlines() if ln.startswith("draft:")]
    assert len(stats) == 1 and int(stats[0].split()[1]) > 0.5 * int(stats[0].split()[3]), stats
    print(f"ok: sampled at 0.8: {stats[0]}")
    for extra, word in [
        (["--draft", gemma_q4], "same tokenizer"),
        (["--draft", brown_q4, "--lookup", "4"], "excludes"),
        (["--draft", brown_q4, "--draft-max", "0"], "--draft-max"),
        (["--draft", os.path.join(a.scratch, "missing.mlb")], "missing.mlb"),
        (["--draft-max", "4"], "--draft"),
    ]:
        r = run([ml_run, "-m", brown, "-p", prompt, "-n", "4", *extra])
        lines = r.stderr.strip().splitlines()
        if not (r.returncode == 2 and word in lines[-1] and "error" in lines[-1]):
            raise SystemExit(
                f"FAILED: {extra}: want exit 2 naming {word!r}, got " f"{r.returncode}: {r.stderr}"
            )
        print(f"ok: refused {' '.join(extra)}: {lines[-1]}")


def strip_draft_args(args: list[str]) -> list[str]:
    """args without the --draft-* options and their values."""
    out, skip = [], False
    for x in args:
        if skip:
            skip = False
        elif x.startswith("--draft"):
            skip = True
        else:
            out.append(x)
    return out
