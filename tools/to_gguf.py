#!/usr/bin/env python3
"""Write a .mlb model as a GGUF file with llama.cpp's names and conventions (numpy only).

Usage: tools/to_gguf.py MODEL.mlb -o OUT.gguf

The tensor data is copied as it is (f32, f16, q8_0 and q4_0 blocks are ggml's layouts), so a
GGUF made from a Q8_0 .mlb holds the same blocks. What changes (after llama.cpp's converter):
- names: `tok_embd` -> `token_embd.weight`, `blk.N.X` -> `blk.N.X.weight`, biases `.bias`;
- llama-architecture q and k rows are permuted from Hugging Face's rotate_half order into the
  interleaved pairs llama.cpp's LLAMA_ROPE_TYPE_NORM rotates;
- the config becomes `{arch}.*` keys, the rope base is recovered from the inverse frequencies;
- the tokenizer becomes tokenizer.ggml.* (SentencePiece-style `llama` vocabularies: tokens,
  scores in merge order, token types).

Supported so far: the llama family (Llama 2/3-style checkpoints with a SentencePiece
byte-fallback vocabulary, Mistral without a window). Others are refused by name.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gguf  # noqa: E402
import mlb  # noqa: E402

PROG = "to_gguf.py"
BYTE_PIECE = re.compile(r"^<0x[0-9A-F]{2}>$")


class ToGgufError(Exception):
    pass


def tensor_name(name: str) -> str:
    """The llama.cpp name of a .mlb tensor."""
    if name == "tok_embd":
        return "token_embd.weight"
    if name.endswith("_bias"):
        return name[: -len("_bias")] + ".bias"
    return name + ".weight"


def interleave_rows(raw: bytes, rows: int, n_heads: int) -> bytes:
    """Rows of one head in rotate_half order (i, i + hd/2) -> interleaved pairs (2i, 2i + 1),
    as llama.cpp's convert_hf_to_gguf permute(); whole rows move, so quantized blocks survive."""
    hd = rows // n_heads
    order = np.arange(rows).reshape(n_heads, 2, hd // 2).swapaxes(1, 2).reshape(rows)
    a = np.frombuffer(raw, dtype=np.uint8).reshape(rows, -1)
    return a[order].tobytes()


def rope_base(c: dict) -> float:
    """The rope base whose plain inverse frequencies are the config's; scaled ones are refused."""
    freqs = np.asarray(c["rope_freqs"], dtype=np.float64)
    dim = int(c.get("rope_dim", c["head_dim"]))
    if len(freqs) != dim // 2 or dim < 4:
        raise ToGgufError(f"rope_freqs has {len(freqs)} entries, rope_dim {dim} needs {dim // 2}")
    base = float(freqs[1] ** (-dim / 2))
    plain = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    if not np.allclose(freqs, plain, rtol=1e-5):
        raise ToGgufError("rope scaling (frequencies not base^(-2i/d)) is not supported yet")
    return base


def llama_vocab(tj: dict, tc: dict) -> dict:
    """tokenizer.ggml.* of a SentencePiece byte-fallback BPE tokenizer.json (kind `llama`)."""
    model = tj.get("model") or {}
    if model.get("type") != "BPE" or not model.get("byte_fallback"):
        raise ToGgufError("tokenizer.json: only byte-fallback BPE (SentencePiece) vocabularies")
    pieces = dict(model["vocab"])
    special = {}
    for t in tj.get("added_tokens") or []:
        pieces[t["content"]] = t["id"]
        special[t["id"]] = bool(t.get("special"))
    n = max(pieces.values()) + 1
    tokens = [""] * n
    for p, i in pieces.items():
        tokens[i] = p
    unk = pieces.get(model.get("unk_token") or "<unk>", -1)
    types, scores = [], []
    for i, p in enumerate(tokens):
        if i == unk:
            t = gguf.TOKEN_UNKNOWN
        elif i in special:
            t = gguf.TOKEN_CONTROL if special[i] else gguf.TOKEN_USER_DEFINED
        elif BYTE_PIECE.match(p):
            t = gguf.TOKEN_BYTE
        else:
            t = gguf.TOKEN_NORMAL
        types.append(t)
        # SentencePiece orders pieces by score, which is also the merge priority
        scores.append(-float(i) if t == gguf.TOKEN_NORMAL else 0.0)

    def tok_id(key: str) -> int:
        v = tc.get(key)
        v = v.get("content") if isinstance(v, dict) else v
        return pieces.get(v, -1) if v else -1

    kv = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": gguf.Value(gguf.ARRAY, tokens, gguf.STRING),
        "tokenizer.ggml.scores": gguf.Value(gguf.ARRAY, scores, gguf.F32),
        "tokenizer.ggml.token_type": gguf.Value(gguf.ARRAY, types, gguf.I32),
        "tokenizer.ggml.add_bos_token": bool(tc.get("add_bos_token", True)),
        "tokenizer.ggml.add_eos_token": bool(tc.get("add_eos_token", False)),
    }
    for key, name in (("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token")):
        if tok_id(name) >= 0:
            kv[f"tokenizer.ggml.{key}_token_id"] = tok_id(name)
    if unk >= 0:
        kv["tokenizer.ggml.unknown_token_id"] = unk
    if tc.get("chat_template"):
        kv["tokenizer.chat_template"] = tc["chat_template"]
    return kv


def llama_keys(c: dict, name: str, dtype: str) -> dict:
    if c["arch"] not in ("llama", "mistral"):
        raise ToGgufError(f"arch '{c['arch']}' is not supported yet (llama, mistral)")
    window = c.get("sliding_window", 0) or max(c.get("layer_window") or [0])
    if window:
        raise ToGgufError("sliding windows are not supported yet")
    a = "llama"
    kv = {
        "general.architecture": a,
        "general.name": name,
        "general.file_type": gguf.FILE_TYPES[dtype],
        f"{a}.context_length": c["max_ctx"],
        f"{a}.embedding_length": c["dim"],
        f"{a}.block_count": c["n_layers"],
        f"{a}.feed_forward_length": c["ffn_dim"],
        f"{a}.attention.head_count": c["n_heads"],
        f"{a}.attention.head_count_kv": c["n_kv_heads"],
        f"{a}.attention.key_length": c["head_dim"],
        f"{a}.attention.value_length": c["head_dim"],
        f"{a}.attention.layer_norm_rms_epsilon": float(c["norm_eps"]),
        f"{a}.rope.freq_base": rope_base(c),
        f"{a}.rope.dimension_count": int(c.get("rope_dim", c["head_dim"])),
        f"{a}.vocab_size": c["n_vocab"],
    }
    return kv


def main_dtype(r: mlb.MlbReader) -> str:
    """The type most matrix bytes have (general.file_type)."""
    sizes: dict[str, int] = {}
    for t in r.meta["tensors"]:
        if len(t["shape"]) == 2 and t["dtype"] != "bytes":
            sizes[t["dtype"]] = sizes.get(t["dtype"], 0) + t["size"]
    return max(sizes, key=lambda k: sizes[k])


def convert(src: str, out: str) -> None:
    r = mlb.MlbReader(src)
    c = r.config
    tj = json.loads(r.raw("tokenizer.json"))
    tc = json.loads(r.raw("tokenizer_config.json"))
    name = os.path.splitext(os.path.basename(src))[0]
    kv = llama_keys(c, name, main_dtype(r))
    kv.update(llama_vocab(tj, tc))
    tensors = []
    for t in r.meta["tensors"]:
        if t["dtype"] == "bytes":
            continue
        raw, shape = r.raw(t["name"]), tuple(t["shape"])
        leaf = t["name"].rsplit(".", 1)[-1]
        if leaf in ("attn_q", "attn_k"):
            heads = c["n_heads"] if leaf == "attn_q" else c["n_kv_heads"]
            raw = interleave_rows(raw, shape[0], heads)
        tensors.append(gguf.Tensor(tensor_name(t["name"]), t["dtype"], shape, raw))
    gguf.write(out, kv, tensors)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument("model", help="the .mlb file")
    p.add_argument("-o", "--out", required=True, help="the GGUF file to write")
    a = p.parse_args(argv)
    try:
        convert(a.model, a.out)
    except (ToGgufError, mlb.MlbError, gguf.GgufError, OSError, KeyError) as e:
        mlb.die(PROG, f"{a.model}: {e}")
    print(f"{PROG}: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
