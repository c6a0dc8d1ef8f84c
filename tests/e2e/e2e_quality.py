"""End-to-end quality checks on the trained model (models/brown-llama, scripts/train_tiny.py):
perplexity on the held-out Brown text against the numpy reference, and what quantization costs.
"""
from __future__ import annotations

import json
import os

from e2e_common import SRC, must, tool

MODEL = os.path.join(SRC, "models", "brown-llama")
TEXT = os.path.join(SRC, "data", "brown-test.txt")
CTX = 256
REF_CHUNKS = 2  # the numpy forward's share: a fixed stretch of the text
CHUNKS = 16  # the quantization comparisons: 16 x 255 predictions


def convert(a, quant: str, *extra: str) -> str:
    name = "-".join(["brown", quant, *[e.lstrip("-") for e in extra]])
    out = os.path.join(a.work, f"{name}.mlb")
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
    llama.cpp's rounding rule."""
    if not os.path.exists(TEXT):
        raise SystemExit(f"missing {TEXT}")
    f32 = convert(a, "f32")
    ids = must([os.path.join(a.bin, "ml_tok"), f32, "encode", "-"], input=open(TEXT).read())
    ids_file = os.path.join(a.work, "brown-test.ids")
    with open(ids_file, "w") as f:
        f.write(ids.stdout)
    bos = ids.stdout.split()[0]
    for scoring in ("all", "llama"):
        ref = json.loads(
            must(
                tool("ref_perplexity.py")
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
    print("ok: quality")
