"""The GGUF cases of e2e.py: a GGUF written from an e2e model's .mlb (tools/to_gguf.py, with
llama.cpp's names, q/k row order and tokenizer keys) runs with logits bit-identical to the .mlb
for every quant type (and through the pack cache) and tokenizes as it; corrupt GGUF files get
one line and exit 2.
"""
from __future__ import annotations

import json
import os
import re
import struct
import subprocess
import urllib.request

import numpy as np

from e2e_common import (
    LIMITS,
    PY,
    QUANT_REF,
    QUANTS,
    SRC,
    mlb,
    ml_run,
    must,
    one_line_errors,
    prompt_ids,
    reference,
    tool,
)

# Texts with spaces, newlines, digits, code, accents, emoji and special-token text.
TEXTS = [
    "Hello world",
    "   x  y\n\n  z",
    "def foo(x):\n    return x * 2\n",
    "café naïve 1234567 😀 ∑",
    "<|im_start|>user\nhi<|im_end|>",
    "<s>[INST] hi [/INST]",
]


# Models whose GGUF holds rope_freqs.weight (llama3 scaling): F32 divisors of the plain
# frequencies, as llama.cpp's converter writes them, round each frequency by up to 6e-8, so
# F32's limit instead of equal bits (measured equal at 41 tokens; without the divisors the
# logits move by 1.6% of the largest).
F32_ROPE_DIVISORS = {"llama-rope3"}


def gguf_of(a, model: str, quant: str, src: str | None = None) -> str:
    out = os.path.join(a.scratch, f"{model}-{quant}.gguf")
    must(tool("to_gguf.py") + [src or mlb(a.work, model, quant), "-o", out])
    return out


def expressible(cfg: dict) -> dict:
    """The config with what llama.cpp's GGUF keys cannot say changed to what they can: Qwen2
    without its sliding windows, SmolLM3's NoPE layer every fourth, Gemma's query scale
    1/sqrt(head_dim) (the e2e models test other values through the .mlb)."""
    out = dict(cfg)
    mt = cfg.get("model_type")
    if mt == "qwen2":
        out["use_sliding_window"] = False
    elif mt == "smollm3":
        out["no_rope_layers"] = [int((i + 1) % 4 != 0) for i in range(cfg["num_hidden_layers"])]
    elif mt in ("gemma2", "gemma3", "gemma3_text"):
        out["query_pre_attn_scalar"] = cfg["head_dim"]
    return out


def gguf_sources(a, model: str) -> dict[str, str]:
    """quant -> the .mlb the GGUF is written from: the model's own, or for a model with what
    GGUF cannot express (expressible()) one converted from a changed copy of its checkpoint."""
    d = os.path.join(a.work, model)
    cfg = json.load(open(os.path.join(d, "config.json")))
    if cfg.get("mlp_only_layers"):  # Qwen3-MoE with dense layers: a checkpoint without them
        nd = os.path.join(a.scratch, f"{model}-gguf-src")
        gen = ["--arch", "qwen3_moe", "--shape", "qwen3moe-tiny-sparse", "--close-router"]
        must(reference("gen_random.py") + gen + ["--seed", "63", "-o", nd])
        out = {q: os.path.join(a.scratch, f"{model}-gguf-src-{q}.mlb") for q in QUANTS}
        for q in QUANTS:
            must(tool("convert.py") + [nd, "-o", out[q], "--quant", q])
        return out
    if expressible(cfg) == cfg:
        return {q: mlb(a.work, model, q) for q in QUANTS}
    nd = os.path.join(a.scratch, f"{model}-gguf-src")
    os.makedirs(nd)
    for f in os.listdir(d):
        if f != "config.json":
            os.symlink(os.path.join(d, f), os.path.join(nd, f))
    json.dump(expressible(cfg), open(os.path.join(nd, "config.json"), "w"))
    out = {}
    for q in QUANTS:
        out[q] = os.path.join(a.scratch, f"{model}-gguf-src-{q}.mlb")
        must(tool("convert.py") + [nd, "-o", out[q], "--quant", q])
    return out


def check_pack_cache(a, g: str, ids: list[int], want: np.ndarray, tag: str) -> None:
    """ml_run on GGUF g through a new pack cache, written and then mapped: logits `want`'s bits."""
    cache = os.path.join(a.scratch, f"pack-{tag}")
    for want_note in ("pack cache: wrote", "pack cache: mapped"):
        out = os.path.join(a.scratch, f"{tag}-cached.npy")
        r = must(
            [os.path.join(a.bin, "ml_run"), "-m", g, "--tokens", ",".join(map(str, ids))]
            + ["--logits", out, "-t", "2", "--pack-cache", cache]
        )
        assert want_note in r.stderr, r.stderr
        assert np.array_equal(np.load(out).view(np.uint32), want.view(np.uint32)), want_note


def check_fused(a, model: str, q: str, args: list[str], ids: list[int], want: np.ndarray) -> None:
    """The MoE GGUF written by to_gguf.py `args` with --fuse-gate-up-exps (each layer's gate and
    up experts in one ffn_gate_up_exps tensor, as llama.cpp's converter writes with that
    option): the same logits, bit for bit, as the unfused file's `want`."""
    g = os.path.join(a.scratch, f"{model}-{q}-fused.gguf")
    must(tool("to_gguf.py") + args + ["-o", g, "--fuse-gate-up-exps"])
    info = json.loads(must([os.path.join(a.bin, "ml_tok"), "info", g, "--json"]).stdout)
    assert any(t["name"].endswith("ffn_gate_up_exps") for t in info["tensors"]), info["tensors"]
    got = os.path.join(a.scratch, f"{model}-{q}-fused.npy")
    ml_run(a, g, ids, got, ["-t", "2"])
    x = np.load(got)
    if x.shape != want.shape or not np.array_equal(x.view(np.uint32), want.view(np.uint32)):
        raise SystemExit(f"FAILED: {model}-{q}: fused gate/up experts change the logits")
    print(f"ok: {model}-{q}: fused gate/up experts give the unfused file's logits")


def case_gguf(a, model: str) -> None:
    ids = prompt_ids(a.work, model)
    mlbs = gguf_sources(a, model)
    for q in QUANTS:
        g = gguf_of(a, model, q, mlbs[q])
        got, want = (os.path.join(a.scratch, f"{model}-{q}-{k}.npy") for k in ("gguf", "mlb"))
        ml_run(a, g, ids, got, ["-t", "2"])
        ml_run(a, mlbs[q], ids, want, ["-t", "2"])
        x, y = np.load(got), np.load(want)
        if model in F32_ROPE_DIVISORS:
            r = must(
                [PY, os.path.join(SRC, "tests", "e2e", "compare.py"), want, got] + LIMITS["f32"]
            )
            print(
                f"ok: {model}-{q}: GGUF logits within F32's limit of the .mlb's: {r.stdout.strip()}"
            )
            continue
        if x.shape != y.shape or not np.array_equal(x.view(np.uint32), y.view(np.uint32)):
            raise SystemExit(f"FAILED: {model}-{q}: GGUF logits differ from the .mlb's")
        print(f"ok: {model}-{q}: GGUF logits bit-identical to the .mlb's {x.shape}")
        if model in QUANT_REF and q == "q8_0":
            check_fused(a, model, q, [mlbs[q]], ids, x)
    # the pack cache serves GGUF files too: written, then mapped, the same logits
    check_pack_cache(a, g, ids, x, f"{model}-q4_0")
    tok = os.path.join(a.bin, "ml_tok")
    # All the texts in one (each ml_tok start on a GGUF rebuilds its tokenizer: 0.4-1.2 s)
    text = "\n\n".join(TEXTS)
    for extra in ([], ["--no-special"]):
        g_ids = must([tok, g, "encode", *extra, text]).stdout
        m_ids = must([tok, mlbs["q4_0"], "encode", *extra, text]).stdout
        assert g_ids == m_ids, (extra, g_ids, m_ids)
    if model == "llama":
        serve_check(a, g)
    info = json.loads(must([tok, "info", g, "--json"]).stdout)
    assert info["kind"] == "model" and info["config"]["n_layers"] > 0, info
    assert (info["format"], info["version"]) == ("gguf", 3), (info["format"], info["version"])
    # --chat auto: the template the GGUF's text is recognised as, the one convert.py chose
    m_info = json.loads(must([tok, "info", mlbs["q4_0"], "--json"]).stdout)
    assert m_info["format"] == "krafla-mlb", m_info["format"]
    assert info["config"]["chat_template"] == m_info["config"]["chat_template"], (
        info["config"]["chat_template"],
        m_info["config"]["chat_template"],
    )
    print(f"ok: {model}: ml_tok encode and info on the GGUF")


# The --quant files each dense model's ggufq4 case writes: all six types over the three.
Q4_SUBSETS = {
    "llama": ("q4_k", "q3_k", "iq4_xs"),
    "qwen3": ("q4_k_m", "q4_1", "iq4_nl"),
    "qwen35": ("q4_k_m", "q3_k", "iq4_xs"),
}


def case_gguf_q4(a, model: str) -> None:
    """GGUF Q4_K and Q4_1 matrices run as Q4_M (4-bit, not widened to Q8_0): the logits of a file
    requantized to them (tools/to_gguf.py --quant, numpy's quantizers) against Krafla's F32 run
    of the very values numpy decodes those blocks to (--round-trip): only the activations'
    8-bit quantization and the f16 rounding of each block's scale and offset lie between, so
    Q8_0's limit holds. q4_k_m adds Q6_K (the embedding, output, attn_v, ffn_down; Q6_H for
    the matmuls on the builds whose kernels take it, requantized to Q8_0 on the others, decoded
    exactly from the file's bytes for the embedding's row lookups, tied or not). Q3_K (as Q3_H
    where Q6_K is Q6_H), IQ4_NL and IQ4_XS (as IQ4_NL, or as Q8_0 with the levels as quants
    where the build lacks IQ4_NL's dot) hold the same limit against numpy's decoding of their
    blocks. The pack cache gives the same bits. Qwen3.5's matrices are requantized in llama.cpp's
    layout (value heads tiled, attn_q holding the gate rows), so the import rewrites them whole
    and then puts them back in Krafla's order."""
    ids = prompt_ids(a.work, model)
    with open(os.path.join(a.bin, "CMakeCache.txt")) as f:
        isa = re.search(r"^KRAFLA_ISA:STRING=(\w+)$", f.read(), re.M).group(1)
    q6 = "q8_0" if isa == "sse2" else "q6_h"
    iq4 = "q8_0" if isa == "sse2" else "iq4_nl"
    q3 = "q8_0" if isa == "sse2" else "q3_h"
    src = mlb(a.work, model, "f32")
    # --quant: the ffn/attn type of the load line (None: mixed), the matrices' types, and the
    # file's types ml_tok info names for them (None: Q8_0, run as it is)
    expect = {
        "q3_k": (None, {q3, "q4_m"}, {"Q3_K", "Q4_1"}),
        "iq4_nl": (iq4, {iq4}, {"IQ4_NL"}),
        "iq4_xs": (iq4, {iq4}, {"IQ4_XS", "IQ4_NL"}),
        "q4_k": ("q4_m", {"q4_m"}, {"Q4_K", "Q4_1"}),
        "q4_k_m": ("q4_m", {"q4_m", q6, "q8_0"}, {"Q4_K", "Q4_1", "Q6_K", None}),
        "q4_1": ("q4_m", {"q4_m"}, {"Q4_1"}),
    }
    if model in QUANT_REF:  # MoE: what differs is only the 3-D tensors' slicing; two files hold
        # every K-quant rewrite path there is (Q4_K, Q6_K, Q4_1; IQ4_XS, IQ4_NL)
        expect = {q: expect[q] for q in ("q4_k_m", "iq4_xs")}
    else:  # every file type at least once over the three dense layouts (Llama's interleaved
        # q/k rows, Qwen3's tied embedding looked up from Q6_K rows, Qwen3.5's re-layouts)
        subset = Q4_SUBSETS.get(model, tuple(expect))
        expect = {q: expect[q] for q in subset}
    for q, (load, types, froms) in expect.items():
        g, rt = (os.path.join(a.scratch, f"{model}-{q}{s}.gguf") for s in ("", "-rt"))
        # one quantization writes both (--round-trip-out: the same bytes as two runs)
        must(tool("to_gguf.py") + [src, "-o", g, "--quant", q, "--round-trip-out", rt])
        got, want = (os.path.join(a.scratch, f"{model}-{q}{s}.npy") for s in ("", "-rt"))
        r = must(
            [os.path.join(a.bin, "ml_run"), "-m", g, "--tokens", ",".join(map(str, ids))]
            + ["--logits", got, "-t", "2"]
        )
        if load:
            assert f"weights {load} (ffn) / {load} (attn)" in r.stderr, r.stderr
        ml_run(a, rt, ids, want, ["-t", "2"])
        # A MoE model's planted near ties (--close-router) go either way under the 8-bit
        # activations' noise (qwen35moe q4_1: KL max 0.015 at one position of 40; 5e-4 where
        # no expert flips): Q4_0's limit there, which a wrongly decoded block still breaks.
        limit = LIMITS["q4_0" if model in QUANT_REF else "q8_0"]
        r = must([PY, os.path.join(SRC, "tests", "e2e", "compare.py"), want, got] + limit)
        print(f"ok: {model} {q} against its F32 round trip: {r.stdout.strip()}")
        info = json.loads(must([os.path.join(a.bin, "ml_tok"), "info", g, "--json"]).stdout)
        # the matrices (not Qwen3.5's ssm_conv, F32 [channels, 4]; nor the MoE routers, F32 as
        # llama-quantize leaves them), the 3-D expert tensors included
        mats = [
            t
            for t in info["tensors"]
            if len(t["shape"]) in (2, 3)
            and t["shape"][-1] % 32 == 0
            and not t["name"].endswith(("ffn_gate_inp", "ffn_gate_inp_shexp"))
        ]
        kinds = {t["dtype"] for t in mats}
        assert kinds <= types and load in kinds | {None}, (q, kinds)
        if q == "q3_k":
            assert q3 in kinds, kinds
        # ml_tok info names the file's type of each rewritten matrix (none for Q8_0: as it is)
        got_froms = {t.get("gguf_type") for t in mats}
        assert got_froms <= froms and got_froms & froms, (q, got_froms)
        if model in QUANT_REF and q == "q4_k_m":
            check_fused(a, model, q, [src, "--quant", q], ids, np.load(got))
    check_pack_cache(a, g, ids, np.load(got), f"{model}-{q}")
    print(f"ok: {model}: Q4_M through the pack cache, the same bits")


def serve_check(a, g: str) -> None:
    """ml_server serves the GGUF: a greedy completion equals ml_run's on the same prompt."""
    prompt, n = "Hello world", 8
    want = must(
        [os.path.join(a.bin, "ml_run"), "-m", g, "-p", prompt, "-n", str(n), "--temp", "0"]
        + ["--no-display-prompt", "-q"]
    ).stdout
    srv = subprocess.Popen(
        [os.path.join(a.bin, "ml_server"), "-m", g, "--port", "0"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        url = None
        for line in srv.stderr:
            m = re.search(r"on (http://[0-9.:]+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "ml_server did not say where it listens"
        body = {"prompt": prompt, "max_tokens": n, "temperature": 0}
        req = urllib.request.Request(
            url + "/v1/completions",
            json.dumps(body).encode(),
            {"Content-Type": "application/json"},
        )
        got = json.loads(urllib.request.urlopen(req, timeout=60).read())["choices"][0]["text"]
        assert got == want.removesuffix("\n"), (got, want)  # ml_run ends with a newline
        print(f"ok: ml_server on the GGUF: {got!r}")
    finally:
        srv.terminate()
        srv.wait(timeout=30)


def _tensor_info_at(data: bytes, name: str) -> int:
    """Offset of the u32 n_dims after a tensor's name in the tensor infos."""
    key = struct.pack("<Q", len(name)) + name.encode()
    return data.index(key) + len(key)


def renamed(good: bytes, old: str, new: str) -> bytes:
    """The file with the first `old` (a key or tensor name) renamed to `new`, of the same length."""
    assert len(old) == len(new)
    return good.replace(old.encode(), new.encode(), 1)


def gguf_variants(good: bytes) -> dict[str, tuple[bytes, str]]:
    """name -> (file bytes, a word the one-line error must contain)."""

    def put(at: int, fmt: str, *v) -> bytes:
        b = bytearray(good)
        struct.pack_into(fmt, b, at, *v)
        return bytes(b)

    first_key = 24  # u64 length of the first key
    w = _tensor_info_at(good, "blk.0.ffn_down.weight")
    n_dims = struct.unpack_from("<I", good, w)[0]
    t_type = w + 4 + 8 * n_dims
    return {
        "truncated-data": (good[: len(good) - 100], "not within"),
        "truncated-header": (good[:40], "does not fit"),
        "old-version": (put(4, "<I", 1), "version 1"),
        "huge-tensor-count": (put(8, "<Q", 1 << 60), "tensor count"),
        "huge-kv-count": (put(16, "<Q", 1 << 60), "metadata count"),
        "huge-key-length": (put(first_key, "<Q", 1 << 50), "key #0 length"),
        "bad-n-dims": (put(w, "<I", 9), "n_dims"),
        "zero-dim": (put(w + 4, "<Q", 0), "bad dimension"),
        "unknown-type": (put(t_type, "<I", 99), "unknown ggml type 99"),
        "unsupported-type": (put(t_type, "<I", 39), "MXFP4"),
        "misaligned-offset": (put(t_type + 4, "<Q", 8), "alignment"),
        "offset-past-end": (put(t_type + 4, "<Q", 1 << 40), "not within"),
        "unknown-arch": (_arch(good), "llamx"),
        "missing-key": (renamed(good, "llama.block_count", "llama.block_coun_"), "block_count"),
        "bad-value-type": (_value_type(good, "llama.block_count", 77), "unknown value type"),
    }


def _arch(good: bytes) -> bytes:
    """general.architecture 'llama' -> 'llamx'."""
    key = b"general.architecture"
    i = good.index(key) + len(key) + 4 + 8  # type, string length
    assert good[i : i + 5] == b"llama"
    return good[:i] + b"llamx" + good[i + 5 :]


def _value_type(good: bytes, key: str, t: int) -> bytes:
    i = good.index(key.encode()) + len(key)
    b = bytearray(good)
    struct.pack_into("<I", b, i, t)
    return bytes(b)


def case_gguf_bad_qwen35(a) -> None:
    """A Qwen3.5 file whose DeltaNet z projection is cut to a quarter of its rows: refused by
    name before its value heads are moved (the loader checks shapes only later)."""
    good = open(gguf_of(a, "qwen35", "q8_0"), "rb").read()
    w = _tensor_info_at(good, "blk.0.attn_gate.weight")
    rows = struct.unpack_from("<Q", good, w + 12)[0]
    bad = bytearray(good)
    struct.pack_into("<Q", bad, w + 12, rows // 4)
    variants = {"qwen35-short-z": (bytes(bad), "too small for")}
    failures = one_line_errors(a, variants, a.scratch, ".gguf")
    if failures:
        raise SystemExit("FAILED: " + ", ".join(failures))


def case_gguf_bad_moe(a) -> None:
    """Qwen3.5-MoE files with bad expert metadata or tensors: one line naming it, exit 2."""
    good = open(gguf_of(a, "qwen35moe", "q8_0"), "rb").read()

    def put_key(key: str, v: int) -> bytes:  # a u32 value: type (4), value
        i = good.index(key.encode()) + len(key)
        assert struct.unpack_from("<I", good, i)[0] == 4, key
        b = bytearray(good)
        struct.pack_into("<I", b, i + 4, v)
        return bytes(b)

    w = _tensor_info_at(good, "blk.0.ffn_up_exps.weight")
    shape = struct.unpack_from("<QQQ", good, w + 4)  # ne: cols, rows, experts
    b = bytearray(good)
    struct.pack_into("<QQQ", b, w + 4, shape[0], shape[1] * 2, shape[2] // 2)
    variants = {
        "moe-no-expert-count": (
            renamed(good, "qwen35moe.expert_count", "qwen35moe.expert_coun_"),
            "expert_count",
        ),
        "moe-zero-experts": (put_key("qwen35moe.expert_count", 0), "n_experts"),
        "moe-topk-over-experts": (put_key("qwen35moe.expert_used_count", 9), "n_experts_used"),
        # the same bytes as half the experts of twice the rows
        "moe-expert-shape": (bytes(b), "shape"),
    }
    failures = one_line_errors(a, variants, a.scratch, ".gguf", set(variants))
    if failures:
        raise SystemExit("FAILED: " + ", ".join(failures))


def case_gguf_bad(a) -> None:
    good = open(gguf_of(a, "llama", "q8_0"), "rb").read()
    failures = one_line_errors(a, gguf_variants(good), a.scratch, ".gguf")
    if failures:
        raise SystemExit("FAILED: " + ", ".join(failures))
