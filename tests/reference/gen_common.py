"""What the random-checkpoint generators share (gen_llama.py, gen_gemma.py, gen_qwen35.py):
the tokenizer lookup, the per-tensor random streams, the safetensors writer, the checkpoint
directory (config.json, generation_config.json, the tokenizer files, model.safetensors) and the
common command-line options.

A tensor spec is (shape, std) or (shape, std, mean): values N(mean, std), generated from the
tensor's own RNG stream (seed, crc32(name)) block of rows by block of rows (or an array: those
values, for tensors assembled from others such as gen_moe.py's fused experts), so tensors can be
made one at a time in any order and a second copy (the llama2.c checkpoint) holds the same values.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
import zlib
from typing import Any, Iterator

import numpy as np

from convert import mlb
from convert import safetensors_io as st
from convert import tokenizer as ctok

PROG = "gen_random.py"
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROW_BLOCK_ELEMS = 1 << 22
ST_DTYPE = {"f32": "F32", "bf16": "BF16", "f16": "F16"}
TORCH_DTYPE = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}
# Scales, tuned on the tiny shapes (40-token prompts): logits std ~2; Q8_0 weights alone
# give KL(f32||q8) ~1e-3 and Q4_0 ~0.05 (max < 0.07), well under the e2e limits (0.01, 0.1),
# while changing the first 30 tokens moves the last logits by KL ~1.5 and rope_theta
# 10000 -> 20000 by ~0.01, so attention, masks and RoPE all matter to the tests.
LOGIT_STD = 2.0  # lm_head (and embedding) rows: N(0, LOGIT_STD/sqrt(dim))
PROJ_GAIN = 0.5  # v, o, gate, up, down: N(0, PROJ_GAIN/sqrt(in_features))
QK_GAIN = 1.0  # q_proj / k_proj: sharper attention than PROJ_GAIN would give
NORM_STD = 0.1  # norm weights: N(1, 0.1), or N(0, 0.1) where the model multiplies by 1 + w

Spec = tuple  # (shape, std) or (shape, std, mean)


def size_config(s: dict) -> dict[str, int]:
    """config.json's size keys (hidden_size .. head_dim) of a generator's shape dict s."""
    return {
        "hidden_size": s["dim"],
        "intermediate_size": s["ffn"],
        "num_hidden_layers": s["n_layers"],
        "num_attention_heads": s["n_heads"],
        "num_key_value_heads": s["n_kv_heads"],
        "head_dim": s["head_dim"],
    }


def attn_specs(p: str, s: dict, qk: float, g: float) -> dict[str, Spec]:
    """q/k/v/o_proj of HF layer prefix p: q and k N(0, qk/sqrt(dim)), v and o N(0, g/sqrt(in))."""
    d, q, kv = s["dim"], s["n_heads"] * s["head_dim"], s["n_kv_heads"] * s["head_dim"]
    a = p + "self_attn."
    return {
        a + "q_proj.weight": ((q, d), qk / np.sqrt(d)),
        a + "k_proj.weight": ((kv, d), qk / np.sqrt(d)),
        a + "v_proj.weight": ((kv, d), g / np.sqrt(d)),
        a + "o_proj.weight": ((d, q), g / np.sqrt(q)),
    }


def resolve_tokenizer(name: str) -> str:
    """A directory with tokenizer.json: NAME_OR_DIR as a path, else REPO/.models/tokenizers/NAME."""
    if os.path.isfile(os.path.join(name, "tokenizer.json")):
        return name
    d = os.path.join(REPO, ".models", "tokenizers", name)
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        raise FileNotFoundError(
            f"tokenizer '{name}' not found at {d}; run scripts/fetch_tokenizers.sh {name}"
        )
    return d


def load_tokenizer(name: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """(directory, tokenizer.json, tokenizer_config.json) of the tokenizer NAME_OR_DIR; a
    missing or unreadable one ends the program with one line."""
    try:
        tok_dir = resolve_tokenizer(name)
        files = ctok.read_tokenizer_files(tok_dir)
        return (
            tok_dir,
            json.loads(files["tokenizer.json"]),
            json.loads(files["tokenizer_config.json"]),
        )
    except (FileNotFoundError, ctok.TokenizerError, ValueError) as e:
        mlb.die(PROG, str(e))
        raise  # not reached: die exits


def round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values as stored in dtype (so the llama2.c copy equals the safetensors one)."""
    if dtype == "bf16":
        return st.bf16_to_f32(st.f32_to_bf16(x))
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    return x


def gen_tensor(
    seed: int,
    name: str,
    shape: tuple[int, ...],
    std: float,
    dtype: str,
    mean: float | None = None,
) -> Iterator[np.ndarray]:
    """The tensor's values N(mean, std) as stored in dtype, in blocks of rows (all axes but the
    last), from its own RNG stream. A mean of 0.0 is still added (turning the rare -0.0 into
    +0.0), None adds none."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    cols = shape[-1]
    rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
    step = max(1, ROW_BLOCK_ELEMS // cols)
    for r in range(0, rows, step):
        n = min(step, rows - r)
        x = rng.standard_normal((n, cols), dtype=np.float32)
        x *= np.float32(std)
        if mean is not None:
            x = x + np.float32(mean)
        yield round_to(x.reshape(-1) if len(shape) == 1 else x, dtype)


def full_tensor(seed: int, name: str, spec: Spec, dtype: str) -> np.ndarray:
    """The whole tensor of a spec."""
    shape, std, mean = spec[0], spec[1], spec[2] if len(spec) > 2 else None
    return np.concatenate(list(gen_tensor(seed, name, shape, std, dtype, mean))).reshape(shape)


def spec_shape(spec: Spec | np.ndarray) -> tuple[int, ...]:
    return tuple(spec.shape) if isinstance(spec, np.ndarray) else tuple(spec[0])


def write_safetensors(
    path: str, specs: dict[str, Spec], seed: int, dtype: str, mean: float | None = None
) -> None:
    """model.safetensors with the tensors of specs, in their order, streamed; mean is that of
    the specs without one (see gen_tensor)."""
    t0 = time.time()
    header = {n: (spec_shape(spec), ST_DTYPE[dtype]) for n, spec in specs.items()}

    def chunks() -> Iterator[tuple[str, np.ndarray]]:
        for i, (n, spec) in enumerate(specs.items()):
            print(f"\r{PROG}: tensor {i + 1}/{len(specs)} {n:48s}", end="", file=sys.stderr)
            if isinstance(spec, np.ndarray):
                yield n, round_to(spec.astype(np.float32), dtype)
                continue
            shape, std, *own = spec
            for piece in gen_tensor(seed, n, shape, std, dtype, own[0] if own else mean):
                yield n, piece

    st.save_file(path, header, chunks(), {"format": "pt"})
    print(
        f"\n{PROG}: wrote {path} ({len(specs)} tensors) in {time.time() - t0:.1f} s",
        file=sys.stderr,
    )


def write_checkpoint(
    out: str,
    cfg: dict[str, Any],
    gen_cfg: dict[str, Any],
    tok_dir: str,
    specs: dict[str, Spec],
    seed: int,
    dtype: str,
    mean: float | None = None,
) -> None:
    """A Hugging Face model directory: config.json, generation_config.json, the tokenizer files
    copied verbatim, model.safetensors (mean: as write_safetensors)."""
    os.makedirs(out, exist_ok=True)
    for name, obj in (("config.json", cfg), ("generation_config.json", gen_cfg)):
        with open(os.path.join(out, name), "w") as f:
            json.dump(obj, f, indent=2)
    for n in ctok.TOKENIZER_FILES:
        shutil.copyfile(os.path.join(tok_dir, n), os.path.join(out, n))
    write_safetensors(os.path.join(out, "model.safetensors"), specs, seed, dtype, mean)


def add_common_args(p: argparse.ArgumentParser, tokenizer_help: str, vocab_help: str = "") -> None:
    """--seed, --dtype, --tokenizer, [--vocab,] -o."""
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=list(ST_DTYPE), default="f32")
    p.add_argument("--tokenizer", help=tokenizer_help)
    if vocab_help:
        p.add_argument("--vocab", type=int, help=vocab_help)
    p.add_argument("-o", "--out", required=True, help="output directory")
