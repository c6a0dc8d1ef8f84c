"""gen_random.py's Gemma 4 checkpoints (gen_random.py --arch gemma4).

Usage: tests/reference/gen_random.py --arch gemma4 [--shape SHAPE] [--layout image-text|text]
       [--seed N] [--dtype f32|bf16|f16] [--tokenizer NAME_OR_DIR] [--vocab N] -o DIR

Shapes (SHAPES), each exercising a released model's features on a 40-token prompt with a
16-token sliding window:
  gemma4-e-tiny (E2B/E4B): 8 layers, sliding/full by layer_types (full at 2, 5 and the last, 7),
    head_dim 32 on sliding and global_head_dim 64 on full layers, proportional RoPE on the full
    ones (partial_rotary_factor 0.25: 8 of 32 pairs rotate), per-layer embeddings of 32 per
    layer, the last 3 layers KV-shared (full layers 5 and 7 read layer 2's K/V, sliding layer 6
    layer 4's) with their MLP twice as wide (use_double_wide_mlp), and their unused
    k_proj/v_proj/k_norm still in the file as Google's checkpoints have them.
  gemma4-moe-tiny (26B-A4B): 4 layers (sliding, full, sliding, full), attention_k_eq_v (full
    layers have no v_proj: V from k_proj, 1 KV head there, 2 on sliding layers), every layer a
    dense MLP of 64 beside 8 experts of 32, top-2, with router.scale and per_expert_scale.
  gemma4-dense-tiny (31B): the MoE shape without experts.
The benchmark shapes gemma4-e2b, gemma4-e4b are the real models' sizes (--layers fewer).
--layout image-text (default): Gemma4ForConditionalGeneration, the text config nested in
text_config and the tensors under model.language_model. (no vision or audio tower: the converter
skips them by prefix); text: Gemma4ForCausalLM, model.*.
Norm weights are N(1, 0.1) (Gemma 4 multiplies by w itself), layer_scalar N(0.8, 0.05),
router.scale N(1, 0.1), per_expert_scale N(1, 0.2). The tokenizer is Gemma 3's (same 262144
vocabulary size; Gemma 4's own is not fetched here).
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from convert import mlb
from gen_common import LOGIT_STD, NORM_STD, PROG, PROJ_GAIN, QK_GAIN, REPO
from gen_common import TORCH_DTYPE, Spec, add_common_args, load_tokenizer, size_config
from gen_common import write_checkpoint

ARCHES = ("gemma4",)
S, F = "sliding_attention", "full_attention"
# fmt: off
TINY = dict(dim=128, n_heads=4, head_dim=32, global_head_dim=64, window=16, vocab=262144,
            theta=1000000.0, local_theta=10000.0, partial=0.25, final_cap=30.0, max_pos=131072)
SHAPES: dict[str, dict] = {
    "gemma4-e-tiny": dict(TINY, n_layers=8, n_kv_heads=1, ffn=128,
                          types=[S, S, F, S, S, F, S, F], ple=32, shared=3, double_wide=True),
    "gemma4-moe-tiny": dict(TINY, n_layers=4, n_kv_heads=2, global_kv_heads=1, ffn=64,
                            types=[S, F, S, F], k_eq_v=True, experts=8, k=2, moe_ffn=32,
                            post_norm_mean=1.2),
    "gemma4-dense-tiny": dict(TINY, n_layers=4, n_kv_heads=2, global_kv_heads=1, ffn=128,
                              types=[S, F, S, F], k_eq_v=True, post_norm_mean=1.2),
    "gemma4-e2b": dict(dim=1536, n_layers=35, n_heads=8, n_kv_heads=1, head_dim=256,
                       global_head_dim=512, ffn=6144, window=512, vocab=262144, theta=1000000.0,
                       local_theta=10000.0, partial=0.25, final_cap=30.0, max_pos=131072,
                       types=[F if (i + 1) % 5 == 0 else S for i in range(35)], ple=256,
                       shared=20, double_wide=True),
    "gemma4-e4b": dict(dim=2560, n_layers=42, n_heads=8, n_kv_heads=2, head_dim=256,
                       global_head_dim=512, ffn=10240, window=512, vocab=262144, theta=1000000.0,
                       local_theta=10000.0, partial=0.25, final_cap=30.0, max_pos=131072,
                       types=[F if (i + 1) % 6 == 0 else S for i in range(42)], ple=256,
                       shared=18),
}
# fmt: on
LAYER_SCALAR = (0.8, 0.05)


def first_shared(s: dict) -> int:
    return s["n_layers"] - s.get("shared", 0)


def text_config(s: dict, n_vocab: int) -> dict:
    c = {
        "model_type": "gemma4_text",
        **size_config(s),
        "global_head_dim": s["global_head_dim"],
        "num_global_key_value_heads": s.get("global_kv_heads"),
        "attention_k_eq_v": bool(s.get("k_eq_v")),
        "hidden_activation": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "sliding_window": s["window"],
        "layer_types": s["types"],
        "rope_parameters": {
            F: {
                "rope_type": "proportional",
                "partial_rotary_factor": s["partial"],
                "rope_theta": s["theta"],
            },
            S: {"rope_type": "default", "rope_theta": s["local_theta"]},
        },
        "final_logit_softcapping": s["final_cap"],
        "vocab_size": n_vocab,
        "vocab_size_per_layer_input": n_vocab,
        "hidden_size_per_layer_input": s.get("ple", 0),
        "num_kv_shared_layers": s.get("shared", 0),
        "use_double_wide_mlp": bool(s.get("double_wide")),
        "enable_moe_block": "experts" in s,
        "num_experts": s.get("experts"),
        "top_k_experts": s.get("k"),
        "moe_intermediate_size": s.get("moe_ffn"),
        "max_position_embeddings": s["max_pos"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": 1,
        "tie_word_embeddings": True,
        "use_bidirectional_attention": None,
    }
    return c


def make_config(s: dict, n_vocab: int, dtype: str, layout: str) -> dict:
    text = text_config(s, n_vocab)
    if layout == "text":
        return {"architectures": ["Gemma4ForCausalLM"], **text, "torch_dtype": TORCH_DTYPE[dtype]}
    return {
        "architectures": ["Gemma4ForConditionalGeneration"],
        "model_type": "gemma4",
        "text_config": text,
        "vision_config": None,
        "audio_config": None,
        "eos_token_id": [1, 106],
        "tie_word_embeddings": True,
        "dtype": TORCH_DTYPE[dtype],
    }


def layer_specs(s: dict, p: str, i: int) -> dict[str, Spec]:
    d, nh = s["dim"], s["n_heads"]
    g, qk = s.get("proj_gain", PROJ_GAIN), s.get("qk_gain", QK_GAIN)
    full = s["types"][i] == F
    hd = s["global_head_dim"] if full else s["head_dim"]
    alt = full and s.get("k_eq_v")
    nkv = s["global_kv_heads"] if alt else s["n_kv_heads"]
    a = p + "self_attn."
    out: dict[str, Spec] = {p + "input_layernorm.weight": ((d,), NORM_STD, 1.0)}
    out[a + "q_proj.weight"] = ((nh * hd, d), qk / np.sqrt(d))
    out[a + "k_proj.weight"] = ((nkv * hd, d), qk / np.sqrt(d))
    if not alt:
        out[a + "v_proj.weight"] = ((nkv * hd, d), g / np.sqrt(d))
    out[a + "o_proj.weight"] = ((d, nh * hd), g / np.sqrt(nh * hd))
    out[a + "q_norm.weight"] = ((hd,), NORM_STD, 1.0)
    out[a + "k_norm.weight"] = ((hd,), NORM_STD, 1.0)
    # post-norms below 1 keep each sublayer's share of the residual moderate (as gen_gemma.py)
    post = s.get("post_norm_mean", 0.5)
    out[p + "post_attention_layernorm.weight"] = ((d,), NORM_STD, post)
    out[p + "pre_feedforward_layernorm.weight"] = ((d,), NORM_STD, 1.0)
    out[p + "post_feedforward_layernorm.weight"] = ((d,), NORM_STD, post)
    f = s["ffn"] * (2 if s.get("double_wide") and i >= first_shared(s) else 1)
    out[p + "mlp.gate_proj.weight"] = ((f, d), g / np.sqrt(d))
    out[p + "mlp.up_proj.weight"] = ((f, d), g / np.sqrt(d))
    out[p + "mlp.down_proj.weight"] = ((d, f), g / np.sqrt(f))
    if "experts" in s:
        e, mf = s["experts"], s["moe_ffn"]
        out[p + "router.proj.weight"] = ((e, d), 1.5 / np.sqrt(d))
        out[p + "router.scale"] = ((d,), NORM_STD, 1.0)
        out[p + "router.per_expert_scale"] = ((e,), 0.2, 1.0)
        out[p + "experts.gate_up_proj"] = ((e, 2 * mf, d), g / np.sqrt(d))
        out[p + "experts.down_proj"] = ((e, d, mf), g / np.sqrt(mf))
        out[p + "pre_feedforward_layernorm_2.weight"] = ((d,), NORM_STD, 1.0)
        out[p + "post_feedforward_layernorm_1.weight"] = ((d,), NORM_STD, 0.7)
        out[p + "post_feedforward_layernorm_2.weight"] = ((d,), NORM_STD, 0.7)
    if s.get("ple"):
        P = s["ple"]
        out[p + "per_layer_input_gate.weight"] = ((P, d), 1.0 / np.sqrt(d))
        out[p + "per_layer_projection.weight"] = ((d, P), g / np.sqrt(P))
        out[p + "post_per_layer_input_norm.weight"] = ((d,), NORM_STD, 0.5)
    out[p + "layer_scalar"] = ((1,), LAYER_SCALAR[1], LAYER_SCALAR[0])
    return out


def tensor_specs(s: dict, n_vocab: int, layout: str) -> dict[str, Spec]:
    """HF name -> (shape, std[, mean]); every tensor N(mean, std) (mean 0 unless given)."""
    d, n = s["dim"], s["n_layers"]
    base = "model.language_model." if layout == "image-text" else "model."
    specs: dict[str, Spec] = {
        base + "embed_tokens.weight": ((n_vocab, d), s.get("logit_std", LOGIT_STD) / np.sqrt(d))
    }
    if s.get("ple"):
        P = s["ple"]
        specs[base + "embed_tokens_per_layer.weight"] = ((n_vocab, n * P), 1.0 / np.sqrt(P))
        specs[base + "per_layer_model_projection.weight"] = ((n * P, d), 1.0 / np.sqrt(d))
        specs[base + "per_layer_projection_norm.weight"] = ((P,), NORM_STD, 1.0)
    for i in range(n):
        specs.update(layer_specs(s, f"{base}layers.{i}.", i))
    specs[base + "norm.weight"] = ((d,), NORM_STD, 1.0)
    return specs


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description="Random-weight Gemma 4 checkpoint (tests/reference/gen_gemma4.py)."
    )
    p.add_argument("--arch", choices=list(ARCHES), required=True)
    p.add_argument("--shape", choices=list(SHAPES), default="gemma4-e-tiny")
    p.add_argument("--layout", choices=["image-text", "text"], default="image-text")
    p.add_argument("--layers", type=int, help="layers (default: the shape's; KV-shared ones kept)")
    add_common_args(
        p,
        "tokenizer name under .models/tokenizers or a directory (default gemma3)",
        "override the embedding rows (converter tests)",
    )
    a = p.parse_args(argv)
    s = dict(SHAPES[a.shape])
    if a.layers:
        if a.layers <= s.get("shared", 0):
            mlb.die(PROG, f"--layers {a.layers} leaves no layer that owns a KV cache")
        s["shared"] = s.get("shared", 0) * a.layers // s["n_layers"]
        s["types"] = s["types"][: a.layers - 1] + [F]
        s["n_layers"] = a.layers
    owners = set(s["types"][: first_shared(s)])
    if s.get("shared") and owners != {S, F}:
        mlb.die(PROG, "the KV-shared layers need a sliding and a full layer before them")
    tok_dir, _, _ = load_tokenizer(
        a.tokenizer or os.path.join(REPO, ".models", "tokenizers", "gemma3")
    )
    n_vocab = a.vocab or s["vocab"]
    gen_cfg = {"bos_token_id": 2, "eos_token_id": [1, 106, 50], "pad_token_id": 0}
    write_checkpoint(
        a.out,
        make_config(s, n_vocab, a.dtype, a.layout),
        gen_cfg,
        tok_dir,
        tensor_specs(s, n_vocab, a.layout),
        a.seed,
        a.dtype,
    )
