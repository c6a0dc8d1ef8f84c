"""End-to-end cases of the executables' user-facing modes on the random checkpoints: ml_run's
command line (cli), ml_bench's table and outputs (bench), ml_run --info / ml_tok info against
tools/convert/mlb.py (info), and ml_tok against the reference tokenizer fixtures (tok). e2e.py
runs them.
"""
from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import time

import numpy as np

from convert import mlb as mlbfile  # the .mlb reader written from docs/format.md
from e2e_common import SRC, Target, corrupt_variants, mlb, must, prompt_ids, reference, run, tool


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
    mlt = os.path.join(a.scratch, f"{model}.mlt")
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
    check_bandwidth(bench, meta)
    # Bad options: one line naming the option, exit 2.
    for args, word in (
        (["-t", "x"], "--threads"),
        (["-t", "1,0"], "--threads"),
        (["-p", "-1"], "--n-prompt"),
        (["-o", "xml"], "--output"),
        (["-r", "0"], "--repetitions"),
        (["-b", "0"], "--batch"),
        (["-d", str(ctx)], "context"),
        (["--bandwidth", "-5"], "--bandwidth"),
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


def decode_bytes(meta: dict, pos: float, kv_bytes: float) -> float:
    """What one decode step at position pos reads, from the file's table and config: every 2-D
    weight but an untied embedding (looked up by rows), k of the E matrices of each 3-D expert
    tensor, each attention layer's keys and values (up to its window), each DeltaNet layer's
    state read and written."""
    c = meta["config"]
    tied = c.get("tie_embeddings", False)
    total = sum(
        t["size"]
        for t in meta["tensors"]
        if t["dtype"] != "bytes" and len(t["shape"]) == 2 and (t["name"] != "tok_embd" or tied)
    )
    total += sum(
        t["size"] // t["shape"][0] * c["n_experts_used"]
        for t in meta["tensors"]
        if len(t["shape"]) == 3
    )
    linear = c.get("layer_linear", [False] * c["n_layers"])
    for i in range(c["n_layers"]):
        if linear[i]:
            total += 2 * 4 * c["lin_v_heads"] * c["lin_k_dim"] * c["lin_v_dim"]
        else:
            total += pos * 2 * c["n_kv_heads"] * c["head_dim"] * kv_bytes
    return total


def check_bandwidth(bench: list[str], meta: dict) -> None:
    """--bandwidth: the tg rows carry the bytes one decode step reads (against decode_bytes, for
    models without sliding windows: within 1%, as ml_bench counts the packed matrices, whose
    last row tile may be padded; the KV cache's part exactly, by the difference between two KV
    types), the bandwidth measured and decode's share of it; md adds one line per tg test; pp
    rows carry none of it."""
    if meta["config"].get("sliding_window", 0):
        return
    args = ["--bandwidth", "32", "-p", "4", "-n", "5", "-d", "8", "-t", "1", "-r", "1"]
    got, want = {}, {}
    for kv, kv_bytes in (("f32", 4.0), ("q8_0", 34 / 32)):
        rows = json.loads(must(bench + args + ["--kv", kv, "-o", "json"]).stdout)
        pp, tg = rows
        assert "bytes_per_token" not in pp, pp
        want[kv] = decode_bytes(meta, 8 + 3, kv_bytes)  # the mean position of tokens 8..12
        got[kv] = tg["bytes_per_token"]
        assert abs(got[kv] - want[kv]) <= 0.01 * want[kv], (got, want)
        bw = tg["read_bandwidth_bs"]
        assert bw > 1e8, tg
        assert np.isclose(tg["bandwidth_share"], got[kv] * tg["avg_ts"] / bw, rtol=1e-6), tg
    kv_part = want["f32"] - want["q8_0"]
    assert kv_part > 0 and abs(got["f32"] - got["q8_0"] - kv_part) <= 1, (got, want)
    md = must(bench + args).stdout
    assert "decode as a share of the read bandwidth:" in md and "tg5 @ d8, 1 thread:" in md, md


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


def case_profile(a, model: str) -> None:
    """ml_run --profile: a row per step that ran, the matmuls by class, and a total that
    accounts for the run's wall time (90-100.5%: only printing, tokenizing and the first
    touches of memory are outside; 120 tokens, so that a fixed cost of a few milliseconds on a
    busy machine stays under 10% of a run of this tiny model; one thread, as ctest runs other
    tests beside it and a pool of two threads on two busy cores waits between steps)."""
    path = mlb(a.work, model, "q8_0")
    n = 120
    cmd = [os.path.join(a.bin, "ml_run"), "-m", path, "-q", "-p", "Once upon a time"]
    cmd += ["-n", str(n), "--temp", "0", "--ignore-eos", "--profile", "-t", "1"]
    # The text to /dev/null: each token written to a pipe wakes this reader, and on a busy
    # machine that handover (outside every step) took up to 45% of the wall time.
    r = subprocess.run(Target.emulator + cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    r.stderr = r.stderr.decode()
    assert r.returncode == 0, r.stderr
    rows = {}
    for line in r.stderr.splitlines():
        m = re.match(r"(\S.*?)\s{2,}(\d+)\s+([\d.]+)\s+([\d.]+)%", line)
        if m:
            rows[m.group(1)] = (int(m.group(2)), float(m.group(3)))
    total = re.search(r"^total\s+([\d.]+)\s+([\d.]+)% of the wall time", r.stderr, re.M)
    assert total, r.stderr
    share = float(total.group(2))
    print(f"profile rows {sorted(rows)}, total {share}% of the wall time")
    assert 90.0 <= share <= 100.5, r.stderr
    want = ["matmul q/k/v", "gate/up + act", "matmul down", "matmul output", "sampling"]
    want += ["delta rule"] if model == "qwen35" else ["attention"]
    for name in want:
        assert name in rows, (name, r.stderr)
    assert rows["matmul output"][0] == n + 1, rows  # the prompt's forward, one per new token
    assert rows["sampling"][0] == n, rows
    assert abs(sum(ms for _, ms in rows.values()) - float(total.group(1))) < 0.05 * len(rows)
    print("ok: profile", model)


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
    if "layer_moe" in meta["config"]:  # a token reads k of the E experts' matrices
        c = meta["config"]
        idle = sum(
            int(np.prod(t["shape"])) // c["n_experts"] * (c["n_experts"] - c["n_experts_used"])
            for t in meta["tensors"]
            if t["name"].endswith("_exps")
        )
        assert info["n_active_params"] == info["n_params"] - idle, (info["n_active_params"], idle)
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
    mlt = os.path.join(a.scratch, f"{model}-info.mlt")
    must(tool("convert_tokenizer.py") + [os.path.join(a.work, model), "-o", mlt])
    t_info = json.loads(must([tok, "info", mlt, "--json"]).stdout)
    assert (
        t_info["kind"] == "tokenizer" and "config" not in t_info and t_info["n_params"] == 0
    ), t_info
    # Corrupt files: one line naming the problem, exit 2 (config errors too: info parses it).
    bad_dir = a.scratch
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
        os.remove(p)  # a copy of the model each: one at a time on disk
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


def ppl_json(a, path: str, text: str, *extra: str) -> dict:
    r = must(
        [os.path.join(a.bin, "ml_run"), "-m", path, "-q", "--perplexity", text, "--json"]
        + list(extra)
    )
    return json.loads(r.stdout)


def log_softmax(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def case_perplexity(a, model: str) -> None:
    """ml_run --perplexity against numpy: the tokens from ml_tok (BOS at each chunk's start),
    the reference forward's logits (tests/reference/ref_forward.py, float64) of each chunk, the
    NLL and KL computed here; both scorings; the KL base file's refusals."""
    n_ctx, chunks = 64, 3
    text = os.path.join(SRC, "docs", "architecture.md")
    f32 = mlb(a.work, model, "f32")
    tok = [os.path.join(a.bin, "ml_tok"), f32, "encode"]
    with open(text, encoding="utf-8") as f:
        body = f.read()
    ids = [int(x) for x in must(tok + ["-"], input=body).stdout.split()]
    plain = must(tok + ["--no-special", "-"], input=body).stdout.split()
    # A tokenizer that adds BOS gets it at every chunk's start (llama-perplexity's rule).
    bos = ids[0] if len(ids) == len(plain) + 1 else None
    work = a.scratch
    lps = []
    for c in range(chunks):
        chunk = ids[c * n_ctx : (c + 1) * n_ctx]
        chunk[0] = chunk[0] if bos is None else bos
        out = os.path.join(work, f"ref{c}.npy")
        must(
            reference("ref_forward.py")
            + [
                os.path.join(a.work, model),
                "--f64",
                "--tokens",
                ",".join(map(str, chunk)),
                "--out",
                out,
            ]
        )
        lp = log_softmax(np.load(out))
        lps.append((chunk, lp))
    for scoring, first in (("all", 0), ("llama", n_ctx // 2)):
        nll = [-lp[j, chunk[j + 1]] for chunk, lp in lps for j in range(first, n_ctx - 1)]
        want = float(np.exp(np.mean(nll)))
        got = ppl_json(
            a, f32, text, "-c", str(n_ctx), "--chunks", str(chunks), "--ppl-scoring", scoring
        )
        assert got["predictions"] == len(nll), (got, len(nll))
        rel = abs(got["ppl"] - want) / want
        print(f"{scoring}: ppl {got['ppl']:.6f}, numpy {want:.6f}, rel {rel:.2e}")
        assert rel < 1e-4, (got["ppl"], want)
    # KL(f32 || q8_0) from the base file against numpy on ml_run's own logits of the chunks.
    base = os.path.join(work, "f32.kld")
    args = [
        "-c",
        str(n_ctx),
        "--chunks",
        str(chunks),
        "--ppl-scoring",
        "llama",
        "--kl-divergence-base",
        base,
    ]
    ppl_json(a, f32, text, *args)
    q8 = mlb(a.work, model, "q8_0")
    got = ppl_json(a, q8, text, *args, "--kl-divergence")["kl"]
    kl, same = [], 0
    for c, (chunk, lp) in enumerate(lps):
        out = os.path.join(work, f"q8_{c}.npy")
        ml_q8 = log_softmax(np.load(ml_run_logits_file(a, q8, chunk, out)))
        ml_f32 = log_softmax(
            np.load(ml_run_logits_file(a, f32, chunk, os.path.join(work, f"f32_{c}.npy")))
        )
        for j in range(n_ctx // 2, n_ctx - 1):
            p = np.exp(ml_f32[j])
            kl.append(float((p * (ml_f32[j] - ml_q8[j])).sum()))
            same += int(np.argmax(ml_f32[j]) == np.argmax(ml_q8[j]))
    want_kl = float(np.mean(kl))
    print(f"KL mean {got['mean']:.6g} (numpy {want_kl:.6g}), p99 {got['p99']:.6g}")
    assert abs(got["mean"] - want_kl) <= 1e-3 * want_kl + 1e-6, (got, want_kl)
    assert abs(got["top1_agreement"] - same / len(kl)) < 1e-9, (got, same)
    assert got["p99"] <= max(kl) * 1.001 + 1e-6 and got["p99"] >= np.quantile(kl, 0.9) * 0.999
    self_kl = ppl_json(a, f32, text, *args, "--kl-divergence")["kl"]
    assert abs(self_kl["mean"]) < 1e-5 and self_kl["top1_agreement"] == 1.0, self_kl
    # Refusals: one line, exit 2.
    ml = [os.path.join(a.bin, "ml_run"), "-m", f32, "-q", "--chunks", str(chunks)]
    short = os.path.join(work, "short.txt")
    with open(short, "w") as f:
        f.write("Far too short a text for two chunks of sixty-four tokens.\n")
    cut = os.path.join(work, "cut.kld")
    with open(base, "rb") as f, open(cut, "wb") as g:
        g.write(f.read(os.path.getsize(base) // 2))
    klb = ["--ppl-scoring", "llama", "--kl-divergence-base"]
    for extra, word in (
        (["-c", str(n_ctx), *klb, cut, "--kl-divergence"], "truncated"),
        (["-c", "32", *klb, base, "--kl-divergence"], "--ctx"),
        (["-c", str(n_ctx), "--kl-divergence-base", base, "--kl-divergence"], "from position"),
        (["-c", str(n_ctx), "--perplexity", short], "need at least"),
    ):
        r = run(ml + (["--perplexity", text] if short not in extra else []) + extra)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and word in lines[0], (
            extra,
            r.returncode,
            r.stderr,
        )
    print("ok: perplexity", model)


def ml_run_logits_file(a, path: str, tokens: list[int], out: str) -> str:
    must(
        [
            os.path.join(a.bin, "ml_run"),
            "-m",
            path,
            "-q",
            "--tokens",
            ",".join(map(str, tokens)),
            "--logits",
            out,
        ]
    )
    return out


def _kill_when(proc: subprocess.Popen, ready, sig: int, what: str, timeout: float = 60) -> bool:
    """Sends sig to proc once ready() is true (polled every 2 ms); False when proc ended first."""
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        if ready():
            proc.send_signal(sig)
            proc.wait()
            return True
        time.sleep(0.002)
    proc.kill()
    raise SystemExit(f"FAILED: {what} never reached the point to interrupt")


def case_killwrite(a, model: str) -> None:
    """Files Krafla writes appear whole or not at all: convert.py killed (SIGKILL) or
    interrupted (SIGINT, Ctrl-C) while writing leaves no file at the output path, and an older
    file there unchanged; ml_run killed while writing its pack cache leaves no cache, and the
    next start writes a whole one whose logits equal the plain load's."""
    src = os.path.join(a.work, model)
    out = os.path.join(a.scratch, "out.mlb")
    conv = tool("convert.py") + [src, "-o", out, "--quant", "f32"]

    def tmp_growing() -> bool:
        return any(
            f.startswith("out.mlb.tmp") and os.path.getsize(os.path.join(a.scratch, f)) > 1 << 20
            for f in os.listdir(a.scratch)
        )

    p = subprocess.Popen(conv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert _kill_when(p, tmp_growing, signal.SIGKILL, "convert.py"), "convert.py ended first"
    assert not os.path.exists(out), "a killed convert.py left a file at its output path"
    for f in os.listdir(a.scratch):  # what kill -9 leaves: only its own temporary name
        assert f.startswith("out.mlb.tmp"), f
        os.remove(os.path.join(a.scratch, f))
    print("ok: convert.py killed midway: no file at the output path")
    shutil.copy(mlb(a.work, model, "q8_0"), out)
    before = open(out, "rb").read()
    p = subprocess.Popen(conv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert _kill_when(p, tmp_growing, signal.SIGINT, "convert.py"), "convert.py ended first"
    assert open(out, "rb").read() == before, "an interrupted convert.py changed the older file"
    assert os.listdir(a.scratch) == ["out.mlb"], os.listdir(a.scratch)  # Ctrl-C cleans up
    print("ok: convert.py interrupted (Ctrl-C): the older file unchanged, nothing left behind")

    cache = os.path.join(a.scratch, "cache")
    path = mlb(a.work, model, "f32")
    ids = ",".join(map(str, prompt_ids(a.work, model)[:4]))
    run_ = [os.path.join(a.bin, "ml_run"), "-m", path, "--tokens", ids, "-t", "2"]

    def cache_tmp() -> bool:
        return os.path.isdir(cache) and any(".tmp" in f for f in os.listdir(cache))

    for attempt in range(10):  # the write takes a fraction of a second: catch it in the act
        shutil.rmtree(cache, ignore_errors=True)
        p = subprocess.Popen(
            run_ + ["--logits", os.path.join(a.scratch, "x.npy"), "--pack-cache", cache],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        if _kill_when(p, cache_tmp, signal.SIGKILL, "ml_run --pack-cache"):
            break
        time.sleep(0.01)
    else:
        raise SystemExit("FAILED: ml_run wrote its pack cache before it could be killed, 10 times")
    left = os.listdir(cache)
    assert all(".tmp" in f for f in left), f"a killed ml_run left a cache file: {left}"
    for f in left:
        os.remove(os.path.join(cache, f))
    plain = os.path.join(a.scratch, "plain.npy")
    cached = os.path.join(a.scratch, "cached.npy")
    must(run_ + ["--logits", plain])
    r = must(run_ + ["--logits", cached, "--pack-cache", cache])
    assert "pack cache: wrote" in r.stderr, r.stderr
    r = must(run_ + ["--logits", cached, "--pack-cache", cache])
    assert "pack cache: mapped" in r.stderr, r.stderr
    assert np.array_equal(np.load(plain).view(np.uint32), np.load(cached).view(np.uint32))
    print(f"ok: ml_run killed while writing its pack cache (attempt {attempt + 1}): no cache left")
