"""Tests of the chat-template guess for Qwen3.5, Qwen2.5 and Llama 3.1
(tools/convert/tokenizer.py).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: Qwen3.5's published chat_template.jinja (tests/unit/chat/qwen3_5.jinja) is named
qwen3.5 and Qwen3's is still qwen3, whether the template sits in tokenizer_config.json or in a
chat_template.jinja beside it (the config's own template wins), and the derived qwen3_5
tokenizer of scripts/fetch_tokenizers.sh; Llama 3.1's own template (llama3_1.jinja) is
llama3.1 while a Llama 3.2-style one (dated today with strftime_now) stays llama3; Qwen2.5's
(qwen2_5.jinja) is qwen.
"""
from __future__ import annotations

import json
import os
import tempfile
import unittest

from convert import tokenizer as ctok

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

TOKS = os.path.join(REPO, ".models", "tokenizers")
with open(os.path.join(REPO, "tests", "unit", "chat", "qwen3_5.jinja"), encoding="utf-8") as _f:
    QWEN35 = _f.read()
PLAIN = {"model": {"vocab": {"a": 0}}}


def _qwen3_template() -> str:
    with open(os.path.join(TOKS, "qwen3", "tokenizer_config.json"), encoding="utf-8") as f:
        return json.load(f)["chat_template"]


def _chat_file(name: str) -> str:
    with open(os.path.join(REPO, "tests", "unit", "chat", name), encoding="utf-8") as f:
        return f.read()


class LlamaQwen25Guess(unittest.TestCase):
    def test_llama31_template(self):
        l31 = _chat_file("llama3_1.jinja")
        self.assertEqual(ctok.guess_chat_template(PLAIN, {"chat_template": l31}), "llama3.1")
        l32 = "{%- if strftime_now is defined %}" + l31
        self.assertEqual(ctok.guess_chat_template(PLAIN, {"chat_template": l32}), "llama3")

    def test_qwen25_template(self):
        q25 = _chat_file("qwen2_5.jinja")
        self.assertEqual(ctok.guess_chat_template(PLAIN, {"chat_template": q25}), "qwen")


class Qwen35Guess(unittest.TestCase):
    def test_template_text(self):
        self.assertEqual(ctok.guess_chat_template(PLAIN, {"chat_template": QWEN35}), "qwen3.5")
        # One of the three markers is not enough: Qwen3-style templates stay qwen3.
        no_fn = QWEN35.replace("<function=", "<fn=")
        self.assertEqual(ctok.guess_chat_template(PLAIN, {"chat_template": no_fn}), "qwen3")
        closed = QWEN35.replace("{{- '<think>\\n' }}", "{{- '' }}")
        self.assertNotEqual(closed, QWEN35)
        self.assertEqual(ctok.guess_chat_template(PLAIN, {"chat_template": closed}), "qwen3")

    @unittest.skipUnless(
        os.path.isfile(os.path.join(TOKS, "qwen3", "tokenizer_config.json")),
        "run scripts/fetch_tokenizers.sh",
    )
    def test_qwen3_stays_qwen3(self):
        self.assertEqual(
            ctok.guess_chat_template(PLAIN, {"chat_template": _qwen3_template()}), "qwen3"
        )

    def test_chat_template_jinja_file(self):
        with tempfile.TemporaryDirectory() as d:
            with open(os.path.join(d, "tokenizer.json"), "w") as f:
                json.dump(PLAIN, f)
            with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
                json.dump({"eos_token": "<|im_end|>"}, f)
            with open(os.path.join(d, "chat_template.jinja"), "w", encoding="utf-8") as f:
                f.write(QWEN35)
            cfg = json.loads(ctok.read_tokenizer_files(d)["tokenizer_config.json"])
            self.assertEqual(cfg["chat_template"], QWEN35)
            self.assertEqual(cfg["eos_token"], "<|im_end|>")
            self.assertEqual(ctok.guess_chat_template(PLAIN, cfg), "qwen3.5")
            # A template in the config itself is kept (its bytes untouched).
            raw = json.dumps({"chat_template": "{{ '<|im_start|>' }}"}).encode()
            with open(os.path.join(d, "tokenizer_config.json"), "wb") as f:
                f.write(raw)
            self.assertEqual(ctok.read_tokenizer_files(d)["tokenizer_config.json"], raw)

    @unittest.skipUnless(
        os.path.isfile(os.path.join(TOKS, "qwen3_5", "tokenizer.json")),
        "run scripts/fetch_tokenizers.sh",
    )
    def test_derived_tokenizer(self):
        files = ctok.read_tokenizer_files(os.path.join(TOKS, "qwen3_5"))
        tj, tc = json.loads(files["tokenizer.json"]), json.loads(files["tokenizer_config.json"])
        self.assertEqual(tc["chat_template"], QWEN35)
        self.assertEqual(ctok.guess_chat_template(tj, tc), "qwen3.5")
        split = tj["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"]
        self.assertIn(r"[\p{L}\p{M}]+", split)
        self.assertIn(r" ?[^\s\p{L}\p{M}\p{N}]+", split)


if __name__ == "__main__":
    unittest.main()
