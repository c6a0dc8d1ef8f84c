#!/usr/bin/env python3
"""Generate a random-weight Hugging Face checkpoint (Llama, Mistral, Qwen2, Qwen3, SmolLM2/3).

Usage: tools/gen_random.py --arch llama|mistral|qwen2|qwen3|smollm3|smollm2 --shape SHAPE
       [--rope linear|yarn [--rope-factor F]] [--seed N] [--dtype f32|bf16|f16]
       [--tokenizer NAME_OR_DIR] [--llama2c-out FILE] -o DIR
SHAPE: tiny, tinyllama, llama3-1b, mistral-tiny, qwen2-tiny, qwen2.5-0.5b, qwen3-tiny,
qwen3-0.6b, smollm3-tiny, smollm3-3b, smollm2-tiny, smollm2-135m (see SHAPES).

Writes config.json, generation_config.json, model.safetensors (HF tensor names), and copies
tokenizer.json / tokenizer_config.json from a real tokenizer (REPO/.models/tokenizers/NAME,
filled by scripts/fetch_tokenizers.sh). Every tensor has its own RNG stream (seed, name), so
tensors are generated one at a time, block of rows by block of rows, in any order; the
optional llama2.c checkpoint therefore holds exactly the same weights.

Scales (see LOGIT_STD, PROJ_GAIN, QK_GAIN): projections N(0, gain/sqrt(in)), norm weights
1 + N(0, 0.1), embedding and lm_head N(0, 2/sqrt(dim)) so that logits have a std of about 2
(random weights would otherwise give near-uniform distributions and meaningless KL tests).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import struct
import sys
import time
import zlib
from typing import Iterator

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import convert_tokenizer as ctok  # noqa: E402
import mlb  # noqa: E402
import safetensors_io as st  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROW_BLOCK_ELEMS = 1 << 22

SHAPES: dict[str, dict] = {
    "tiny": dict(dim=256, n_layers=2, n_heads=8, n_kv_heads=2, head_dim=32, ffn=352,
                 theta=10000.0, eps=1e-5, max_pos=2048, tied=False, tok="llama2"),
    "tinyllama": dict(dim=2048, n_layers=22, n_heads=32, n_kv_heads=4, head_dim=64, ffn=5632,
                      theta=10000.0, eps=1e-5, max_pos=2048, tied=False, tok="llama2"),
    "llama3-1b": dict(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, head_dim=64, ffn=8192,
                      theta=500000.0, eps=1e-5, max_pos=131072, tied=True, tok="llama3",
                      rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                                    "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 8192}),
    "mistral-tiny": dict(dim=128, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, ffn=256,
                         theta=10000.0, eps=1e-5, max_pos=4096, tied=False, tok="llama2",
                         sliding_window=16),
}
# Qwen/SmolLM shapes. The tiny ones exercise each family's feature: qwen2-tiny slides a
# 16-token window on layers >= max_window_layers (2, 3) only; qwen3-tiny has head_dim 64 with
# dim/n_heads = 32 (and q/k norms); smollm3-tiny mixes RoPE and NoPE layers (no_rope_layers
# 1,0,1,0). vocab pads the embedding past the tokenizer as the real checkpoints do.
# The dim-128 shapes are more sensitive to Q4_0 than "tiny" (dim 256): their own gains keep
# KL(f32||Q4_0 weights) at ~0.005-0.04 mean and <= 0.075 max on 40-token prompts (seeds 0, 11,
# 13, with and without --rope) while attention still matters: changing the first 30 tokens moves
# the last logits by KL ~2-4 (qwen2-tiny ~0.3-0.5, its last two layers only see 16 tokens).
# qwen3-tiny's q/k norms ignore qk_gain; a lower logit_std keeps its yarn variant in bounds.
SMALL_GAINS = dict(proj_gain=0.45, qk_gain=0.7, logit_std=1.8)
SHAPES.update({
    "qwen2-tiny": dict(**SMALL_GAINS, dim=128, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32, ffn=256,
                       theta=1000000.0, eps=1e-6, max_pos=4096, tied=True, tok="qwen3", vocab=151936,
                       use_sliding_window=True, sliding_window=16, max_window_layers=2),
    "qwen2.5-0.5b": dict(dim=896, n_layers=24, n_heads=14, n_kv_heads=2, head_dim=64, ffn=4864,
                         theta=1000000.0, eps=1e-6, max_pos=32768, tied=True, tok="qwen3", vocab=151936,
                         use_sliding_window=False, sliding_window=32768, max_window_layers=21),
    "qwen3-tiny": dict(**dict(SMALL_GAINS, logit_std=1.5), dim=128, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=64, ffn=256,
                       theta=1000000.0, eps=1e-6, max_pos=4096, tied=True, tok="qwen3", vocab=151936,
                       use_sliding_window=False, sliding_window=None, max_window_layers=3),
    "qwen3-0.6b": dict(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, ffn=3072,
                       theta=1000000.0, eps=1e-6, max_pos=40960, tied=True, tok="qwen3", vocab=151936,
                       use_sliding_window=False, sliding_window=None, max_window_layers=28),
    "smollm3-tiny": dict(**SMALL_GAINS, dim=128, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32, ffn=256,
                         theta=5000000.0, eps=1e-6, max_pos=4096, tied=True, tok="llama3",
                         no_rope_layers=[1, 0, 1, 0]),
    "smollm3-3b": dict(dim=2048, n_layers=36, n_heads=16, n_kv_heads=4, head_dim=128, ffn=11008,
                       theta=5000000.0, eps=1e-6, max_pos=65536, tied=True, tok="llama3",
                       no_rope_layers=[int((i + 1) % 4 != 0) for i in range(36)]),
    # SmolLM2 is LlamaForCausalLM with a GPT-2-style byte-level BPE; no SmolLM2 tokenizer is
    # fetched here, so Qwen3's (also byte-level BPE) stands in.
    "smollm2-tiny": dict(**SMALL_GAINS, dim=128, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=32, ffn=256,
                         theta=100000.0, eps=1e-5, max_pos=8192, tied=True, tok="qwen3"),
    "smollm2-135m": dict(dim=576, n_layers=30, n_heads=9, n_kv_heads=3, head_dim=64, ffn=1536,
                         theta=100000.0, eps=1e-5, max_pos=8192, tied=True, tok="qwen3"),
})
# --arch -> (model_type, architectures entry); smollm2 is the llama architecture.
ARCH_CLASS = {"llama": ("llama", "LlamaForCausalLM"), "mistral": ("mistral", "MistralForCausalLM"),
              "qwen2": ("qwen2", "Qwen2ForCausalLM"), "qwen3": ("qwen3", "Qwen3ForCausalLM"),
              "smollm3": ("smollm3", "SmolLM3ForCausalLM"), "smollm2": ("llama", "LlamaForCausalLM")}
ST_DTYPE = {"f32": "F32", "bf16": "BF16", "f16": "F16"}
# Scales, tuned on the tiny shapes (40-token prompts): logits std ~2; Q8_0 weights alone
# give KL(f32||q8) ~1e-3 and Q4_0 ~0.05 (max < 0.07), well under the e2e limits (0.01, 0.1),
# while changing the first 30 tokens moves the last logits by KL ~1.5 and rope_theta
# 10000 -> 20000 by ~0.01, so attention, masks and RoPE all matter to the tests.
LOGIT_STD = 2.0     # lm_head (and embedding) rows: N(0, LOGIT_STD/sqrt(dim))
PROJ_GAIN = 0.5     # v, o, gate, up, down: N(0, PROJ_GAIN/sqrt(in_features))
QK_GAIN = 1.0       # q_proj / k_proj: sharper attention than PROJ_GAIN would give
BIAS_STD = 0.5      # Qwen2 q/k/v biases: N(0, BIAS_STD), the size of a projected element


def resolve_tokenizer(name: str) -> str:
    """A directory with tokenizer.json: NAME_OR_DIR as a path, else REPO/.models/tokenizers/NAME."""
    if os.path.isfile(os.path.join(name, "tokenizer.json")):
        return name
    d = os.path.join(REPO, ".models", "tokenizers", name)
    if not os.path.isfile(os.path.join(d, "tokenizer.json")):
        raise FileNotFoundError(f"tokenizer '{name}' not found at {d}; run scripts/fetch_tokenizers.sh {name}")
    return d


def rope_scaling(kind: str | None, factor: float, max_pos: int) -> tuple[dict | None, int]:
    """(rope_scaling dict, max_position_embeddings) for --rope: linear keeps the context, yarn
    extends it factor times past the pretraining one (original_max_position_embeddings)."""
    if not kind:
        return None, max_pos
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}, max_pos
    return ({"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": max_pos},
            int(max_pos * factor))


def make_config(arch: str, s: dict, n_vocab: int, bos: int, eos: int, dtype: str) -> dict:
    model_type, cls = ARCH_CLASS[arch]
    cfg = {
        "architectures": [cls],
        "model_type": model_type, "hidden_size": s["dim"], "intermediate_size": s["ffn"],
        "num_hidden_layers": s["n_layers"], "num_attention_heads": s["n_heads"],
        "num_key_value_heads": s["n_kv_heads"], "head_dim": s["head_dim"],
        "hidden_act": "silu", "rms_norm_eps": s["eps"], "rope_theta": s["theta"],
        "rope_scaling": s.get("rope_scaling"), "max_position_embeddings": s["max_pos"],
        "tie_word_embeddings": s["tied"], "bos_token_id": bos if bos >= 0 else None,
        "eos_token_id": eos, "vocab_size": n_vocab, "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "torch_dtype": {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[dtype],
        "use_cache": True,
    }
    if model_type in ("llama", "mistral", "qwen3", "smollm3"):
        cfg.update(attention_bias=False)
    if model_type in ("llama", "smollm3"):
        cfg.update(mlp_bias=False, pretraining_tp=1)
    if arch == "mistral":
        cfg["sliding_window"] = s.get("sliding_window", 4096)
    if model_type in ("qwen2", "qwen3"):
        cfg.update(use_sliding_window=s.get("use_sliding_window", False),
                   sliding_window=s.get("sliding_window"),
                   max_window_layers=s.get("max_window_layers", s["n_layers"]))
    if model_type == "smollm3":
        no_rope = s.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(s["n_layers"])]
        cfg.update(no_rope_layers=no_rope, no_rope_layer_interval=4,
                   use_sliding_window=False, sliding_window=None)
    return cfg


def tensor_specs(s: dict, n_vocab: int, arch: str = "llama") -> dict[str, tuple[tuple[int, ...], float]]:
    """HF name -> (shape, std); std < 0 marks a norm weight (1 + N(0, 0.1))."""
    d, hd, f = s["dim"], s["head_dim"], s["ffn"]
    out_scale = s.get("logit_std", LOGIT_STD) / np.sqrt(d)
    g, qk = s.get("proj_gain", PROJ_GAIN), s.get("qk_gain", QK_GAIN)
    specs: dict[str, tuple[tuple[int, ...], float]] = {"model.embed_tokens.weight": ((n_vocab, d), out_scale)}
    for i in range(s["n_layers"]):
        p = f"model.layers.{i}."
        specs[p + "input_layernorm.weight"] = ((d,), -1.0)
        specs[p + "self_attn.q_proj.weight"] = ((s["n_heads"] * hd, d), qk / np.sqrt(d))
        specs[p + "self_attn.k_proj.weight"] = ((s["n_kv_heads"] * hd, d), qk / np.sqrt(d))
        specs[p + "self_attn.v_proj.weight"] = ((s["n_kv_heads"] * hd, d), g / np.sqrt(d))
        specs[p + "self_attn.o_proj.weight"] = ((d, s["n_heads"] * hd), g / np.sqrt(s["n_heads"] * hd))
        if arch == "qwen2":
            for x, n in (("q", s["n_heads"]), ("k", s["n_kv_heads"]), ("v", s["n_kv_heads"])):
                specs[p + f"self_attn.{x}_proj.bias"] = ((n * hd,), BIAS_STD)
        if arch == "qwen3":
            specs[p + "self_attn.q_norm.weight"] = ((hd,), -1.0)
            specs[p + "self_attn.k_norm.weight"] = ((hd,), -1.0)
        specs[p + "post_attention_layernorm.weight"] = ((d,), -1.0)
        specs[p + "mlp.gate_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.up_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.down_proj.weight"] = ((d, f), g / np.sqrt(f))
    specs["model.norm.weight"] = ((d,), -1.0)
    if not s["tied"]:
        specs["lm_head.weight"] = ((n_vocab, d), out_scale)
    return specs


def _round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """The values as stored in dtype (so the llama2.c copy equals the safetensors one)."""
    if dtype == "bf16":
        return st.bf16_to_f32(st.f32_to_bf16(x))
    if dtype == "f16":
        return x.astype(np.float16).astype(np.float32)
    return x


def gen_tensor(seed: int, name: str, shape: tuple[int, ...], std: float,
               dtype: str) -> Iterator[np.ndarray]:
    """The tensor's values, in blocks of rows, from its own RNG stream."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    cols = shape[-1]
    rows = shape[0] if len(shape) == 2 else 1
    step = max(1, ROW_BLOCK_ELEMS // cols)
    for r in range(0, rows, step):
        n = min(step, rows - r)
        x = rng.standard_normal((n, cols), dtype=np.float32)
        if std < 0:
            x = np.float32(1.0) + np.float32(0.1) * x
        else:
            x *= np.float32(std)
        yield _round_to(x.reshape(-1) if len(shape) == 1 else x, dtype)


def write_safetensors(path: str, specs: dict, seed: int, dtype: str) -> None:
    t0 = time.time()
    header = {n: (sh, ST_DTYPE[dtype]) for n, (sh, _) in specs.items()}

    def chunks() -> Iterator[tuple[str, np.ndarray]]:
        for i, (n, (sh, std)) in enumerate(specs.items()):
            print(f"\rgen_random: tensor {i + 1}/{len(specs)} {n:48s}", end="", file=sys.stderr)
            for piece in gen_tensor(seed, n, sh, std, dtype):
                yield n, piece
    st.save_file(path, header, chunks(), {"format": "pt"})
    print(f"\ngen_random: wrote {path} in {time.time() - t0:.1f} s", file=sys.stderr)


def hf_to_interleaved(w: np.ndarray, n_heads: int) -> np.ndarray:
    """Undo the q/k row permutation of HF's convert_llama_weights_to_hf (rotate_half order
    -> Meta/llama2.c order that rotates adjacent pairs (2i, 2i+1))."""
    rows, cols = w.shape
    hd = rows // n_heads
    return w.reshape(n_heads, 2, hd // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def write_llama2c(path: str, s: dict, specs: dict, seed: int, dtype: str, n_vocab: int) -> None:
    """llama2.c version-0 checkpoint (run.c): 7 int32 header, then float32 arrays;
    a negative vocab_size means an unshared classifier follows the RoPE tables."""
    if s["dim"] != s["n_heads"] * s["head_dim"] or s.get("rope_scaling") or s["theta"] != 10000.0:
        raise ValueError("llama2.c needs head_dim = dim/n_heads, rope_theta 10000 and no rope scaling")
    seq_len = min(s["max_pos"], 2048)
    L = s["n_layers"]

    def full(name: str) -> np.ndarray:
        sh, std = specs[name]
        return np.concatenate(list(gen_tensor(seed, name, sh, std, dtype))).reshape(sh)

    def per_layer(suffix: str, heads: int = 0) -> Iterator[np.ndarray]:
        for i in range(L):
            w = full(f"model.layers.{i}.{suffix}")
            yield hf_to_interleaved(w, heads) if heads else w

    with open(path, "wb") as f:
        vocab_field = n_vocab if s["tied"] else -n_vocab
        f.write(struct.pack("<7i", s["dim"], s["ffn"], L, s["n_heads"], s["n_kv_heads"],
                            vocab_field, seq_len))
        groups = [[full("model.embed_tokens.weight")], per_layer("input_layernorm.weight"),
                  per_layer("self_attn.q_proj.weight", s["n_heads"]),
                  per_layer("self_attn.k_proj.weight", s["n_kv_heads"]),
                  per_layer("self_attn.v_proj.weight"), per_layer("self_attn.o_proj.weight"),
                  per_layer("post_attention_layernorm.weight"), per_layer("mlp.gate_proj.weight"),
                  per_layer("mlp.down_proj.weight"), per_layer("mlp.up_proj.weight"),
                  [full("model.norm.weight")]]
        for g in groups:
            for a in g:
                f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())
        hd = s["head_dim"]
        freqs = 1.0 / (10000.0 ** (np.arange(0, hd, 2, dtype=np.float64) / hd))
        ang = np.outer(np.arange(seq_len), freqs)
        f.write(np.cos(ang).astype("<f4").tobytes())
        f.write(np.sin(ang).astype("<f4").tobytes())
        if not s["tied"]:
            f.write(full("lm_head.weight").astype("<f4").tobytes())


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    import gen_gemma   # --arch gemma2|gemma3|gemma3-vl: tools/gen_gemma.py
    if gen_gemma.wants(argv):
        return gen_gemma.main(argv)
    import gen_qwen35  # --arch qwen3.5: tools/gen_qwen35.py
    if gen_qwen35.wants(argv):
        return gen_qwen35.main(argv)
    p = argparse.ArgumentParser(prog="gen_random.py", description=__doc__.split("\n")[0],
                                epilog="Gemma: --arch gemma2|gemma3|gemma3-vl, see tools/gen_gemma.py; "
                                "Qwen3.5: --arch qwen3.5, see tools/gen_qwen35.py")
    p.add_argument("--arch", choices=list(ARCH_CLASS), required=True,
                   help="smollm2 = the llama architecture (model_type llama)")
    p.add_argument("--shape", choices=list(SHAPES), required=True)
    p.add_argument("--rope", choices=["linear", "yarn"], help="add this rope scaling to the shape")
    p.add_argument("--rope-factor", type=float, default=4.0, help="its factor (default 4)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--dtype", choices=list(ST_DTYPE), default="f32")
    p.add_argument("--tokenizer", help="tokenizer name under .models/tokenizers or a directory")
    p.add_argument("--llama2c-out", help="also write the weights as a llama2.c checkpoint")
    p.add_argument("-o", "--out", required=True, help="output directory")
    a = p.parse_args(argv)
    s = dict(SHAPES[a.shape])
    if a.rope:
        if s.get("rope_scaling"):
            mlb.die("gen_random.py", f"--rope: shape {a.shape} already has rope scaling")
        s["rope_scaling"], s["max_pos"] = rope_scaling(a.rope, a.rope_factor, s["max_pos"])
    if a.llama2c_out and (a.arch != "llama" or s.get("rope_scaling") or s["theta"] != 10000.0):
        mlb.die("gen_random.py", "--llama2c-out needs --arch llama and a shape with plain RoPE "
                "(theta 10000): llama2.c has no sliding window and no rope scaling")
    try:
        tok_dir = resolve_tokenizer(a.tokenizer or s["tok"])
        files = ctok.read_tokenizer_files(tok_dir)
        tj, tc = json.loads(files["tokenizer.json"]), json.loads(files["tokenizer_config.json"])
    except (FileNotFoundError, ctok.TokenizerError, ValueError) as e:
        mlb.die("gen_random.py", str(e))
    n_vocab = max(ctok.vocab_size(tj), s.get("vocab", 0))
    bos, eos = ctok.special_id(tj, tc, "bos_token"), ctok.special_id(tj, tc, "eos_token")
    os.makedirs(a.out, exist_ok=True)
    cfg = make_config(a.arch, s, n_vocab, bos, eos, a.dtype)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    eos_list = [eos] + [i for t, i in ctok.token_ids(tj).items()
                        if t in ("<|eot_id|>", "<|endoftext|>") and i != eos]
    with open(os.path.join(a.out, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": bos, "eos_token_id": eos_list if len(eos_list) > 1 else eos,
                   "do_sample": False}, f, indent=2)
    for n in ctok.TOKENIZER_FILES:
        shutil.copyfile(os.path.join(tok_dir, n), os.path.join(a.out, n))
    specs = tensor_specs(s, n_vocab, a.arch)
    write_safetensors(os.path.join(a.out, "model.safetensors"), specs, a.seed, a.dtype)
    if a.llama2c_out:
        try:
            write_llama2c(a.llama2c_out, s, specs, a.seed, a.dtype, n_vocab)
        except ValueError as e:
            mlb.die("gen_random.py", str(e))
        print(f"gen_random: wrote {a.llama2c_out}", file=sys.stderr)


if __name__ == "__main__":
    main()
