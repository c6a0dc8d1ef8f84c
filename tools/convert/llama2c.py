"""A llama2.c version-0 checkpoint (a 28-byte header of 7 int32, then the float32 arrays) to .mlb,
through the llama family with a Hugging Face tokenizer directory.
"""

from __future__ import annotations

import json
import os
import struct
from typing import Any

import numpy as np

from . import tokenizer as ctok
from .families.base import Getter
from .families.llama import LLAMA
from .hf_config import ConvertError
from .writer import PROG, write_mlb


def interleaved_to_hf(w: np.ndarray, n_heads: int) -> np.ndarray:
    """llama2.c/Meta q,k row order (pairs 2i,2i+1) -> HF rotate_half order, as HF's
    convert_llama_weights_to_hf permute()."""
    rows, cols = w.shape
    hd = rows // n_heads
    return w.reshape(n_heads, hd // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def llama2c_source(path: str) -> tuple[dict[str, Any], Getter]:
    """A HF-style config and a tensor getter (HF names) for a llama2.c version-0 checkpoint."""
    with open(path, "rb") as f:
        dim, hidden, L, nh, nkv, vocab, seq = struct.unpack("<7i", f.read(28))
    shared, vocab = vocab > 0, abs(vocab)
    hd = dim // nh
    m = np.memmap(path, dtype="<f4", mode="r", offset=28)
    layout: list[tuple[str, tuple[int, ...]]] = [
        ("embd", (vocab, dim)),
        ("att_norm", (L, dim)),
        ("wq", (L, nh * hd, dim)),
        ("wk", (L, nkv * hd, dim)),
        ("wv", (L, nkv * hd, dim)),
        ("wo", (L, dim, nh * hd)),
        ("ffn_norm", (L, dim)),
        ("w1", (L, hidden, dim)),
        ("w2", (L, dim, hidden)),
        ("w3", (L, hidden, dim)),
        ("norm", (dim,)),
        ("cos", (seq, hd // 2)),
        ("sin", (seq, hd // 2)),
    ]
    if not shared:
        layout.append(("wcls", (vocab, dim)))
    arrays, off = {}, 0
    for name, shape in layout:
        n = int(np.prod(shape))
        if off + n > m.shape[0]:
            raise ConvertError(f"{path}: truncated llama2.c checkpoint at '{name}'")
        arrays[name] = m[off : off + n].reshape(shape)
        off += n
    names = {
        "input_layernorm": ("att_norm", 0),
        "self_attn.q_proj": ("wq", nh),
        "self_attn.k_proj": ("wk", nkv),
        "self_attn.v_proj": ("wv", 0),
        "self_attn.o_proj": ("wo", 0),
        "post_attention_layernorm": ("ffn_norm", 0),
        "mlp.gate_proj": ("w1", 0),
        "mlp.down_proj": ("w2", 0),
        "mlp.up_proj": ("w3", 0),
    }

    def get(hf: str, rows: slice) -> np.ndarray:
        if hf == "model.embed_tokens.weight":
            return np.array(arrays["embd"][rows])
        if hf == "lm_head.weight":
            return np.array(arrays["wcls"][rows])
        if hf == "model.norm.weight":
            return np.array(arrays["norm"])
        parts = hf.split(".")
        key, heads = names[".".join(parts[3:-1])]
        a = np.array(arrays[key][int(parts[2])])
        if heads:
            a = interleaved_to_hf(a, heads)
        return a if a.ndim == 1 else a[rows]

    cfg = {
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
        "hidden_size": dim,
        "intermediate_size": hidden,
        "num_hidden_layers": L,
        "num_attention_heads": nh,
        "num_key_value_heads": nkv,
        "head_dim": hd,
        "rms_norm_eps": 1e-5,
        "rope_theta": 10000.0,
        "max_position_embeddings": seq,
        "tie_word_embeddings": shared,
        "vocab_size": vocab,
    }
    return cfg, get


def convert_llama2c(
    ckpt: str, tok_dir: str, out: str, qtype: str, q8: set[str], q4_rule: str
) -> None:
    if not os.path.isfile(ckpt):
        raise ConvertError(f"missing {ckpt}")
    tok_files = ctok.read_tokenizer_files(tok_dir)
    tj, tc = json.loads(tok_files["tokenizer.json"]), json.loads(tok_files["tokenizer_config.json"])
    cfg, get = llama2c_source(ckpt)
    c = LLAMA.normalize_config(cfg, {}, tj, tc)
    source = {
        "tool": PROG,
        "input": os.path.abspath(ckpt),
        "format": "llama2.c v0",
        "quant": qtype,
        "q4_rule": q4_rule,
        "q8": sorted(q8),
    }
    write_mlb(out, c, LLAMA.tensor_plan(c), get, tok_files, qtype, q8, q4_rule, source)
