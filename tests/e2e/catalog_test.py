"""scripts/convert_catalog.py offline: the shipped catalogue validates against ml_run's chat
templates; a catalogue of the trained model, a random Qwen3 checkpoint (from the e2e setup) and
a model that is not downloaded converts the two present ones, writes their cards (parameter
counts equal to the safetensors headers' sums, read independently here), skips the third,
and a malformed entry is refused by name.

    catalog_test.py BUILD_DIR SOURCE_DIR
"""
import json
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

BIN, SRC = sys.argv[1], sys.argv[2]
TOOL = [sys.executable, os.path.join(SRC, "scripts", "convert_catalog.py"), "--bin", BIN]


def params(checkpoint: str) -> int:
    with open(os.path.join(checkpoint, "model.safetensors"), "rb") as f:
        header = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
    header.pop("__metadata__", None)
    return sum(math.prod(t["shape"]) for t in header.values())


def run(args, ok=True):
    p = subprocess.run(TOOL + args, capture_output=True, text=True)
    if (p.returncode == 0) != ok:
        raise SystemExit(f"catalog_test: {' '.join(args)} exited {p.returncode}:\n{p.stderr}")
    return p.stdout + p.stderr


out = run(["--downloads", "/nonexistent", "--out", "/nonexistent", "--check"])
assert re.search(r"\d+ models, all valid", out), out

with tempfile.TemporaryDirectory() as tmp:
    sources = {
        "local/brown-llama": os.path.join(SRC, "models", "brown-llama"),
        "local/qwen3-random": os.path.join(BIN, "e2e", "qwen3"),
    }
    dl = os.path.join(tmp, "dl")
    os.makedirs(os.path.join(dl, "local"))
    for repo, path in sources.items():
        os.symlink(path, os.path.join(dl, repo))
    entries = [
        {"repo": "local/brown-llama", "family": "llama", "chat": "llama2", "quant": "q8_0"},
        {"repo": "local/qwen3-random", "family": "qwen3", "chat": "qwen3", "quant": "q4_0"},
        {"repo": "local/not-downloaded", "family": "gemma3", "chat": "gemma", "quant": "q8_0"},
    ]
    catalog = os.path.join(tmp, "catalog.json")
    with open(catalog, "w") as f:
        json.dump({"models": [{**e, "since": "0.1.0"} for e in entries]}, f)
    out_dir = os.path.join(tmp, "out")
    text = os.path.join(tmp, "brown-test.txt")  # the first 8 kB: a few chunks are enough here
    with open(os.path.join(SRC, "data", "brown-test.txt"), encoding="utf-8") as f:
        head = f.read(8000)
    with open(text, "w", encoding="utf-8") as f:
        f.write(head)
    out = run(
        ["--catalog", catalog, "--downloads", dl, "--out", out_dir, "-t", "2", "--text", text]
    )
    assert "not downloaded (skipped): local/not-downloaded" in out, out
    for e in entries[:2]:
        stem = f"{e['repo'].split('/')[1]}-{e['quant']}"
        assert os.path.getsize(os.path.join(out_dir, stem + ".mlb")) > 0
        card = open(os.path.join(out_dir, stem + ".md")).read()
        want = f"| parameters | {params(sources[e['repo']]) / 1e6:.1f} M |"
        assert want in card, f"{stem}: no '{want}' in\n{card}"
        assert re.search(r"\| decode \(tg32\) \| [0-9.]+ tokens/s \|", card), card
        assert re.search(r"\| perplexity \| [0-9.]+ ± [0-9.]+ \(brown-test.txt", card), card
        assert f"--chat {e['chat']}" in card, card

    with open(catalog, "w") as f:
        json.dump({"models": [{**entries[0], "since": "0.1.0", "chat": "nonsense"}]}, f)
    out = run(["--catalog", catalog, "--downloads", dl, "--out", out_dir, "--check"], ok=False)
    assert "local/brown-llama: chat template 'nonsense'" in out, out
print("catalog_test: ok")
