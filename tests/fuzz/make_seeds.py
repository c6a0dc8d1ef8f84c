#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora into tests/fuzz/corpus/TARGET/ (checked in; run again
only to change them). Each seed is laid out as its target reads it (fuzz_input.h: fields
separated by 0x1F). The model seeds are a tiny random checkpoint
(tests/reference/gen_random.py --shape fuzz) with a 266-token byte-level tokenizer, converted to
.mlb, .mlt and GGUF, and a Mixture-of-Experts one (qwen3moe-tiny-sparse) with the same tokenizer,
as .mlb and GGUF.

Usage: /usr/bin/python3 tests/fuzz/make_seeds.py
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
SEP = b"\x1f"
PY = sys.executable


def gpt2_bytes() -> list[str]:
    """GPT-2's byte → printable character map (the ByteLevel pre-tokenizer's alphabet)."""
    bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    table = dict(zip(bs, cs))
    return [chr(table[b]) for b in range(256)]


def bytelevel_tokenizer() -> tuple[dict, dict]:
    chars = gpt2_bytes()
    vocab = {c: i for i, c in enumerate(chars)}
    merges = [["Ġ", "t"], ["h", "e"], ["Ġt", "he"], ["i", "n"], ["Ġ", "a"], ["e", "r"]]
    for a, b in merges:
        vocab[a + b] = len(vocab)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>"]
    added = []
    for sp in specials:
        added.append(
            {
                "id": len(vocab) + len(added),
                "content": sp,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": sp != "<think>",
            }
        )
    tj = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "post_processor": None,
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": True,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": vocab,
            "merges": [" ".join(m) for m in merges],
        },
    }
    tc = {"bos_token": None, "eos_token": "<|endoftext|>", "model_max_length": 64}
    return tj, tc


def sentencepiece_tokenizer() -> tuple[dict, dict]:
    """Llama 2's layout: byte fallback, "▁" for spaces, BOS added by the post-processor."""
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for piece in ["▁", "e", "t", "h", "a", "▁t", "he", "▁the", "▁a"]:
        vocab[piece] = len(vocab)
    added = [
        {
            "id": i,
            "content": t,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for t, i in (("<unk>", 0), ("<s>", 1), ("</s>", 2))
    ]
    tj = {
        "version": "1.0",
        "added_tokens": added,
        "normalizer": {
            "type": "Sequence",
            "normalizers": [
                {"type": "Prepend", "prepend": "▁"},
                {"type": "Replace", "pattern": {"String": " "}, "content": "▁"},
            ],
        },
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
            ],
            "pair": [
                {"SpecialToken": {"id": "<s>", "type_id": 0}},
                {"Sequence": {"id": "A", "type_id": 0}},
                {"Sequence": {"id": "B", "type_id": 0}},
            ],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
                {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "vocab": vocab,
            "merges": ["▁ t", "h e", "▁t he", "▁ a"],
        },
    }
    tc = {"bos_token": "<s>", "eos_token": "</s>", "add_bos_token": True}
    return tj, tc


def write(target: str, name: str, data: bytes) -> None:
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def fields(*parts) -> bytes:
    return SEP.join(p if isinstance(p, bytes) else str(p).encode() for p in parts)


def ids(*xs: int) -> bytes:
    return b"".join(struct.pack("<i", x) for x in xs)


def model_seeds(tmp: str) -> None:
    tj, tc = bytelevel_tokenizer()
    tok = os.path.join(tmp, "tok")
    os.makedirs(tok)
    json.dump(tj, open(os.path.join(tok, "tokenizer.json"), "w", encoding="utf-8"))
    json.dump(tc, open(os.path.join(tok, "tokenizer_config.json"), "w"))
    hf = os.path.join(tmp, "hf")
    # the generator (tests/reference) imports the converter package: tools/ on its PYTHONPATH
    env = dict(os.environ, PYTHONPATH=os.path.join(ROOT, "tools"))

    def run(*a: str) -> None:
        subprocess.run([PY, *a], check=True, capture_output=True, env=env)

    run(
        os.path.join(ROOT, "tests", "reference", "gen_random.py"),
        "--arch",
        "qwen3",
        "--shape",
        "fuzz",
        "--tokenizer",
        tok,
        "-o",
        hf,
    )
    for q in ("q8_0", "q4_0"):
        out = os.path.join(tmp, f"fuzz-{q}.mlb")
        run(os.path.join(ROOT, "tools", "convert.py"), hf, "-o", out, "--quant", q)
        shutil.copy(out, os.path.join(HERE, "corpus", "model", f"fuzz-{q}.mlb"))
    run(
        os.path.join(ROOT, "tools", "to_gguf.py"),
        os.path.join(tmp, "fuzz-q8_0.mlb"),
        "-o",
        os.path.join(HERE, "corpus", "model", "fuzz-q8_0.gguf"),
    )
    # a Mixture-of-Experts model (every layer sparse, as GGUF has it): the 3-D expert tensors
    moe = os.path.join(tmp, "hf-moe")
    run(
        os.path.join(ROOT, "tests", "reference", "gen_random.py"),
        "--arch",
        "qwen3_moe",
        "--shape",
        "qwen3moe-tiny-sparse",
        "--layers",
        "2",
        "--vocab",
        "266",
        "--tokenizer",
        tok,
        "-o",
        moe,
    )
    out = os.path.join(HERE, "corpus", "model", "fuzz-moe-q8_0.mlb")
    run(os.path.join(ROOT, "tools", "convert.py"), moe, "-o", out, "--quant", "q8_0")
    gguf = os.path.join(HERE, "corpus", "model", "fuzz-moe-q8_0.gguf")
    run(os.path.join(ROOT, "tools", "to_gguf.py"), out, "-o", gguf)
    run(
        os.path.join(ROOT, "tools", "convert_tokenizer.py"),
        tok,
        "-o",
        os.path.join(HERE, "corpus", "model", "fuzz.mlt"),
    )


TEXTS = [
    b"Hello world",
    b"   x  y\n\n  z",
    "café naïve 1234567 😀 ∑ 日本語".encode(),
    b"<|im_start|>user\nhi<|im_end|>",
    b"<s>[INST] hi [/INST]</s>",
    b"\xff\xfe invalid \xc3 utf-8 \xe2\x82",
    b"",
]


def main() -> None:
    shutil.rmtree(os.path.join(HERE, "corpus"), ignore_errors=True)
    os.makedirs(os.path.join(HERE, "corpus", "model"))
    with tempfile.TemporaryDirectory() as tmp:
        model_seeds(tmp)
    for k, (tj, tc) in enumerate((bytelevel_tokenizer(), sentencepiece_tokenizer())):
        for i, t in enumerate(TEXTS[:4]):
            write("tokenizer_json", f"tok{k}-{i}", fields(json.dumps(tj), json.dumps(tc), t))
    for which in range(5):
        for i, t in enumerate(TEXTS):
            write("tokenize", f"t{which}-{i}", bytes([which, i % 16]) + t + SEP + ids(1, 2, 300, 5))
    write("tokenize", "bad-ids", bytes([1, 0]) + b"hi" + SEP + ids(-1, 1 << 30))

    tools = json.dumps(
        [
            {
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "description": "Weather",
                    "parameters": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                },
            }
        ]
    )
    replies = [
        '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n</parameter>\n"
        "</function>\n</tool_call>",
        '{"name": "get_weather", "parameters": {"city": "Oslo"}}',
        "<think>\nreasoning\n</think>\n\nThe answer.",
    ]
    for t in range(16):
        msgs = [
            (0, "Be brief.", "", ""),
            (1, "Weather in Oslo?", "", ""),
            (2, "", "get_weather", '{"city": "Oslo"}'),
            (3, '{"temp": 3}', "get_weather", ""),
            (2, "It is 3 degrees.", "", ""),
            (1, "Thanks", "", ""),
        ]
        body = b"".join(fields(bytes([r]), c, n, a) + SEP for r, c, n, a in msgs)
        write(
            "chat",
            f"t{t}",
            bytes([t, 1 | (t % 4) << 5])
            + fields(tools if t % 2 else "", replies[t % 4])
            + SEP
            + body,
        )

    chat = {
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}],
        "max_tokens": 8,
        "temperature": 0.7,
        "top_p": 0.9,
        "seed": 3,
        "stop": ["\n", "END"],
        "stream": True,
        "stream_options": {"include_usage": True},
        "logprobs": True,
        "top_logprobs": 3,
        "n": 2,
    }
    schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "age": {"type": "integer", "minimum": 0},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["name"],
        "additionalProperties": False,
    }
    bodies = [
        (0, chat),
        (0, dict(chat, tools=json.loads(tools), tool_choice="required")),
        (
            0,
            dict(
                chat,
                tools=json.loads(tools),
                tool_choice={"type": "function", "function": {"name": "get_weather"}},
            ),
        ),
        (0, dict(chat, response_format={"type": "json_object"})),
        (
            0,
            dict(
                chat,
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "p", "strict": True, "schema": schema},
                },
            ),
        ),
        (1, {"prompt": "Once upon a time", "max_tokens": 16, "logprobs": 2, "echo": False}),
        (1, {"prompt": [1, 2, 3], "max_tokens": 4, "temperature": 0}),
        (1, {"prompt": "x", "min_p": 0.1, "top_k": 40, "repeat_penalty": 1.1}),
    ]
    for i, (ep, b) in enumerate(bodies):
        write("request", f"r{i}", bytes([ep]) + json.dumps(b).encode())
    write("request", "deep", bytes([0]) + b"[" * 2000 + b"]" * 2000)

    schemas = [
        (schema, '{"name": "Ada", "age": 36, "tags": ["x", "y"]}'),
        ({"type": "array", "items": {"type": "number"}, "minItems": 1}, "[1, -2.5e3, 0.25]"),
        ({"enum": ["red", "green", 3, None]}, '"green"'),
        ({"anyOf": [{"type": "string"}, {"type": "boolean"}]}, "true"),
        ({"type": "object"}, '{"a": {"b": [1, "\\u00e9\\n"]}}'),
        ({"type": "string", "maxLength": 4}, '"abc"'),
    ]
    for i, (s, text) in enumerate(schemas):
        write("json_schema", f"s{i}", bytes([i]) + fields(json.dumps(s), text))


if __name__ == "__main__":
    main()
