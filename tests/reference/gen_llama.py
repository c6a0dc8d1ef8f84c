"""Generate a random-weight Hugging Face checkpoint (Llama, Mistral, Qwen2, Qwen3, SmolLM2/3).

Usage: tests/reference/gen_random.py --arch llama|mistral|qwen2|qwen3|smollm3|smollm2 --shape SHAPE
       [--rope linear|yarn|llama3 [--rope-factor F]] [--seed N] [--dtype f32|bf16|f16]
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
import struct
import sys
from typing import Iterator

import numpy as np

from convert import mlb
from convert import tokenizer as ctok
from gen_common import LOGIT_STD, NORM_STD, PROG, PROJ_GAIN, QK_GAIN, TORCH_DTYPE
from gen_common import Spec, add_common_args, full_tensor, load_tokenizer
from gen_common import attn_specs, size_config, write_checkpoint


# fmt: off
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
    # the fuzz targets' seed models (tests/fuzz/make_seeds.py): a few kilobytes
    "fuzz": dict(dim=32, n_layers=1, n_heads=2, n_kv_heads=1, head_dim=16, ffn=64,
                 theta=10000.0, eps=1e-5, max_pos=64, tied=True, tok="llama2"),
}
# fmt: on
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
# fmt: off
SHAPES.update({
    "qwen2-tiny": dict(**SMALL_GAINS, dim=128, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=32,
                       ffn=256, theta=1000000.0, eps=1e-6, max_pos=4096, tied=True, tok="qwen3",
                       vocab=151936, use_sliding_window=True, sliding_window=16,
                       max_window_layers=2),
    "qwen2.5-0.5b": dict(dim=896, n_layers=24, n_heads=14, n_kv_heads=2, head_dim=64, ffn=4864,
                         theta=1000000.0, eps=1e-6, max_pos=32768, tied=True, tok="qwen3",
                         vocab=151936, use_sliding_window=False, sliding_window=32768,
                         max_window_layers=21),
    "qwen3-tiny": dict(**dict(SMALL_GAINS, logit_std=1.5), dim=128, n_layers=3, n_heads=4,
                       n_kv_heads=2, head_dim=64, ffn=256, theta=1000000.0, eps=1e-6,
                       max_pos=4096, tied=True, tok="qwen3", vocab=151936,
                       use_sliding_window=False, sliding_window=None, max_window_layers=3),
    "qwen3-0.6b": dict(dim=1024, n_layers=28, n_heads=16, n_kv_heads=8, head_dim=128, ffn=3072,
                       theta=1000000.0, eps=1e-6, max_pos=40960, tied=True, tok="qwen3",
                       vocab=151936, use_sliding_window=False, sliding_window=None,
                       max_window_layers=28),
    "smollm3-tiny": dict(**SMALL_GAINS, dim=128, n_layers=4, n_heads=4, n_kv_heads=2,
                         head_dim=32, ffn=256, theta=5000000.0, eps=1e-6, max_pos=4096,
                         tied=True, tok="llama3", no_rope_layers=[1, 0, 1, 0]),
    "smollm3-3b": dict(dim=2048, n_layers=36, n_heads=16, n_kv_heads=4, head_dim=128, ffn=11008,
                       theta=5000000.0, eps=1e-6, max_pos=65536, tied=True, tok="llama3",
                       no_rope_layers=[int((i + 1) % 4 != 0) for i in range(36)]),
    # SmolLM2 is LlamaForCausalLM with a GPT-2-style byte-level BPE; no SmolLM2 tokenizer is
    # fetched here, so Qwen3's (also byte-level BPE) stands in.
    "smollm2-tiny": dict(**SMALL_GAINS, dim=128, n_layers=2, n_heads=4, n_kv_heads=2,
                         head_dim=32, ffn=256, theta=100000.0, eps=1e-5, max_pos=8192,
                         tied=True, tok="qwen3"),
    "smollm2-135m": dict(dim=576, n_layers=30, n_heads=9, n_kv_heads=3, head_dim=64, ffn=1536,
                         theta=100000.0, eps=1e-5, max_pos=8192, tied=True, tok="qwen3"),
})
# --arch -> (model_type, architectures entry); smollm2 is the llama architecture.
ARCH_CLASS = {"llama": ("llama", "LlamaForCausalLM"), "mistral": ("mistral", "MistralForCausalLM"),
              "qwen2": ("qwen2", "Qwen2ForCausalLM"), "qwen3": ("qwen3", "Qwen3ForCausalLM"),
              "smollm3": ("smollm3", "SmolLM3ForCausalLM"),
              "smollm2": ("llama", "LlamaForCausalLM")}
# fmt: on
# LOGIT_STD, PROJ_GAIN, QK_GAIN: gen_common.py.
BIAS_STD = 0.5  # Qwen2 q/k/v biases: N(0, BIAS_STD), the size of a projected element


def rope_scaling(kind: str | None, factor: float, max_pos: int) -> tuple[dict | None, int]:
    """(rope_scaling dict, max_position_embeddings) for --rope: linear keeps the context, yarn
    and llama3 extend it factor times past the pretraining one (original_max_position_embeddings;
    llama3 with Llama 3.1's low/high frequency factors 1 and 4)."""
    if not kind:
        return None, max_pos
    if kind == "linear":
        return {"rope_type": "linear", "factor": factor}, max_pos
    if kind == "llama3":
        sc = {"rope_type": "llama3", "factor": factor, "low_freq_factor": 1.0}
        sc.update(high_freq_factor=4.0, original_max_position_embeddings=max_pos)
        return sc, int(max_pos * factor)
    return (
        {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": max_pos},
        int(max_pos * factor),
    )


def make_config(arch: str, s: dict, n_vocab: int, bos: int, eos: int, dtype: str) -> dict:
    model_type, cls = ARCH_CLASS[arch]
    cfg = {
        "architectures": [cls],
        "model_type": model_type,
        **size_config(s),
        "hidden_act": "silu",
        "rms_norm_eps": s["eps"],
        "rope_theta": s["theta"],
        "rope_scaling": s.get("rope_scaling"),
        "max_position_embeddings": s["max_pos"],
        "tie_word_embeddings": s["tied"],
        "bos_token_id": bos if bos >= 0 else None,
        "eos_token_id": eos,
        "vocab_size": n_vocab,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "torch_dtype": TORCH_DTYPE[dtype],
        "use_cache": True,
    }
    if model_type in ("llama", "mistral", "qwen3", "smollm3"):
        cfg.update(attention_bias=False)
    if model_type in ("llama", "smollm3"):
        cfg.update(mlp_bias=False, pretraining_tp=1)
    if arch == "mistral":
        cfg["sliding_window"] = s.get("sliding_window", 4096)
    if model_type in ("qwen2", "qwen3"):
        cfg.update(
            use_sliding_window=s.get("use_sliding_window", False),
            sliding_window=s.get("sliding_window"),
            max_window_layers=s.get("max_window_layers", s["n_layers"]),
        )
    if model_type == "smollm3":
        no_rope = s.get("no_rope_layers") or [int((i + 1) % 4 != 0) for i in range(s["n_layers"])]
        cfg.update(
            no_rope_layers=no_rope,
            no_rope_layer_interval=4,
            use_sliding_window=False,
            sliding_window=None,
        )
    return cfg


def tensor_specs(s: dict, n_vocab: int, arch: str = "llama") -> dict[str, Spec]:
    """HF name -> (shape, std[, mean]); norm weights are N(1, 0.1)."""
    d, hd, f = s["dim"], s["head_dim"], s["ffn"]
    out_scale = s.get("logit_std", LOGIT_STD) / np.sqrt(d)
    g, qk = s.get("proj_gain", PROJ_GAIN), s.get("qk_gain", QK_GAIN)
    norm = NORM_STD, 1.0
    specs: dict[str, Spec] = {"model.embed_tokens.weight": ((n_vocab, d), out_scale)}
    for i in range(s["n_layers"]):
        p = f"model.layers.{i}."
        specs[p + "input_layernorm.weight"] = ((d,), *norm)
        specs.update(attn_specs(p, s, qk, g))
        if arch == "qwen2":
            for x, n in (("q", s["n_heads"]), ("k", s["n_kv_heads"]), ("v", s["n_kv_heads"])):
                specs[p + f"self_attn.{x}_proj.bias"] = ((n * hd,), BIAS_STD)
        if arch == "qwen3":
            specs[p + "self_attn.q_norm.weight"] = ((hd,), *norm)
            specs[p + "self_attn.k_norm.weight"] = ((hd,), *norm)
        specs[p + "post_attention_layernorm.weight"] = ((d,), *norm)
        specs[p + "mlp.gate_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.up_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.down_proj.weight"] = ((d, f), g / np.sqrt(f))
    specs["model.norm.weight"] = ((d,), *norm)
    if not s["tied"]:
        specs["lm_head.weight"] = ((n_vocab, d), out_scale)
    return specs


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
        raise ValueError(
            "llama2.c needs head_dim = dim/n_heads, rope_theta 10000 and no rope scaling"
        )
    seq_len = min(s["max_pos"], 2048)
    L = s["n_layers"]

    def full(name: str) -> np.ndarray:
        return full_tensor(seed, name, specs[name], dtype)

    def per_layer(suffix: str, heads: int = 0) -> Iterator[np.ndarray]:
        for i in range(L):
            w = full(f"model.layers.{i}.{suffix}")
            yield hf_to_interleaved(w, heads) if heads else w

    with open(path, "wb") as f:
        vocab_field = n_vocab if s["tied"] else -n_vocab
        f.write(
            struct.pack(
                "<7i", s["dim"], s["ffn"], L, s["n_heads"], s["n_kv_heads"], vocab_field, seq_len
            )
        )
        groups = [
            [full("model.embed_tokens.weight")],
            per_layer("input_layernorm.weight"),
            per_layer("self_attn.q_proj.weight", s["n_heads"]),
            per_layer("self_attn.k_proj.weight", s["n_kv_heads"]),
            per_layer("self_attn.v_proj.weight"),
            per_layer("self_attn.o_proj.weight"),
            per_layer("post_attention_layernorm.weight"),
            per_layer("mlp.gate_proj.weight"),
            per_layer("mlp.down_proj.weight"),
            per_layer("mlp.up_proj.weight"),
            [full("model.norm.weight")],
        ]
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
    p = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__.split("\n")[0],
        epilog="Gemma: --arch gemma2|gemma3|gemma3-vl, see tests/reference/gen_gemma.py; "
        "Qwen3.5: --arch qwen3.5, see tests/reference/gen_qwen35.py",
    )
    p.add_argument(
        "--arch",
        choices=list(ARCH_CLASS),
        required=True,
        help="smollm2 = the llama architecture (model_type llama)",
    )
    p.add_argument("--shape", choices=list(SHAPES), required=True)
    p.add_argument(
        "--rope", choices=["linear", "yarn", "llama3"], help="add this rope scaling to the shape"
    )
    p.add_argument("--rope-factor", type=float, default=4.0, help="its factor (default 4)")
    p.add_argument("--llama2c-out", help="also write the weights as a llama2.c checkpoint")
    add_common_args(p, "tokenizer name under .models/tokenizers or a directory")
    a = p.parse_args(argv)
    s = dict(SHAPES[a.shape])
    if a.rope:
        if s.get("rope_scaling"):
            mlb.die(PROG, f"--rope: shape {a.shape} already has rope scaling")
        s["rope_scaling"], s["max_pos"] = rope_scaling(a.rope, a.rope_factor, s["max_pos"])
    if a.llama2c_out and (a.arch != "llama" or s.get("rope_scaling") or s["theta"] != 10000.0):
        mlb.die(
            PROG,
            "--llama2c-out needs --arch llama and a shape with plain RoPE "
            "(theta 10000): llama2.c has no sliding window and no rope scaling",
        )
    tok_dir, tj, tc = load_tokenizer(a.tokenizer or s["tok"])
    n_vocab = max(ctok.vocab_size(tj), s.get("vocab", 0))
    bos, eos = ctok.special_id(tj, tc, "bos_token"), ctok.special_id(tj, tc, "eos_token")
    eos_list = [eos] + [
        i
        for t, i in ctok.token_ids(tj).items()
        if t in ("<|eot_id|>", "<|endoftext|>") and i != eos
    ]
    gen_cfg = {
        "bos_token_id": bos,
        "eos_token_id": eos_list if len(eos_list) > 1 else eos,
        "do_sample": False,
    }
    specs = tensor_specs(s, n_vocab, a.arch)
    write_checkpoint(
        a.out,
        make_config(a.arch, s, n_vocab, bos, eos, a.dtype),
        gen_cfg,
        tok_dir,
        specs,
        a.seed,
        a.dtype,
    )
    if a.llama2c_out:
        try:
            write_llama2c(a.llama2c_out, s, specs, a.seed, a.dtype, n_vocab)
        except ValueError as e:
            mlb.die(PROG, str(e))
        print(f"{PROG}: wrote {a.llama2c_out}", file=sys.stderr)
