#!/usr/bin/env python3
"""Derive a Qwen3.5-style tokenizer from Qwen3's: same byte-level BPE vocabulary and merges,
Qwen3.5's pre-tokenizer regex, Qwen3.5's chat template.

Usage: /usr/bin/python3 scripts/derive_qwen3_5_tokenizer.py QWEN3_DIR OUT_DIR

No npm package ships the real Qwen3.5 tokenizer (a larger vocabulary), so the tests use this
one. What differs from Qwen3 is the pre-tokenizer: Qwen3.5 keeps combining marks (\\p{M}) with
the letters they follow (transformers' Qwen3.5 tokenizer, PRETOKENIZE_REGEX); its NFC normalizer
and ByteLevel(use_regex=false) step are Qwen3's. scripts/fetch_tokenizers.sh qwen3_5 runs this.
"""
from __future__ import annotations

import json
import os
import sys

QWEN3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN35_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TEMPLATE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "tests", "unit", "chat", "qwen3_5.jinja"
)


def die(msg: str) -> None:
    print(f"derive_qwen3_5_tokenizer: error: {msg}", file=sys.stderr)
    sys.exit(2)


def derive(src: str, out: str) -> None:
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tok = json.load(f)
    pre = tok.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers", []) if pre.get("type") == "Sequence" else []
    splits = [s for s in steps if s.get("type") == "Split"]
    if (
        (tok.get("normalizer") or {}).get("type") != "NFC"
        or len(splits) != 1
        or splits[0].get("pattern", {}).get("Regex") != QWEN3_REGEX
    ):
        die(f"{src}/tokenizer.json is not Qwen3's (NFC, one Split with Qwen3's regex)")
    splits[0]["pattern"]["Regex"] = QWEN35_REGEX
    with open(os.path.join(src, "tokenizer_config.json"), encoding="utf-8") as f:
        cfg = json.load(f)
    with open(TEMPLATE, encoding="utf-8") as f:
        cfg["chat_template"] = f.read()
    cfg["krafla_derived"] = (
        "Qwen3's vocabulary and merges behind Qwen3.5's pre-tokenizer regex "
        "and chat template (scripts/derive_qwen3_5_tokenizer.py)"
    )
    os.makedirs(out, exist_ok=True)
    for name, obj in (("tokenizer.json", tok), ("tokenizer_config.json", cfg)):
        tmp = os.path.join(out, name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(obj, f, ensure_ascii=False, indent=2)
            f.write("\n")
        os.replace(tmp, os.path.join(out, name))


if __name__ == "__main__":
    if len(sys.argv) != 3:
        die("usage: derive_qwen3_5_tokenizer.py QWEN3_DIR OUT_DIR")
    try:
        derive(sys.argv[1], sys.argv[2])
    except (OSError, ValueError) as e:
        die(str(e))
