#!/usr/bin/python3
"""Vocabulary-only GGUF files (tools/convert/to_gguf.py) of the tokenizer fixtures
GgufFixtureTest reads: each fixture's tokenizer folder under .models/tokenizers with the
fixture's own changes applied as tokenizer_fixture_test.cpp applies them (model_additions:
vocabulary entries and merges appended; tokenizer_overrides: top-level keys; config_overrides:
tokenizer_config keys), so the reference ids of gen_fixtures.mjs hold for the GGUF too. A
fixture whose folder is missing is skipped (the test then skips it as well).

    PYTHONPATH=tools make_gguf_vocabs.py OUT_DIR NAME...   (ctest sets PYTHONPATH)
"""
from __future__ import annotations

import json
import os
import sys

from convert import to_gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def main() -> int:
    out_dir, names = sys.argv[1], sys.argv[2:]
    os.makedirs(out_dir, exist_ok=True)
    for name in names:
        with open(os.path.join(HERE, "fixtures", name + ".json"), encoding="utf-8") as f:
            fixture = json.load(f)
        d = os.path.join(ROOT, ".models", "tokenizers", fixture["tokenizer"])
        if not os.path.isfile(os.path.join(d, "tokenizer.json")):
            continue
        with open(os.path.join(d, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        with open(os.path.join(d, "tokenizer_config.json"), encoding="utf-8") as f:
            tc = json.load(f)
        add = fixture.get("model_additions")
        if add:
            tj["model"]["vocab"].update(add["vocab"])
            tj["model"]["merges"] += add["merges"]
        tj.update(fixture.get("tokenizer_overrides") or {})
        tc.update(fixture.get("config_overrides") or {})
        to_gguf.write_vocab(tj, tc, os.path.join(out_dir, name + ".gguf"), name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
