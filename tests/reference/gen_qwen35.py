"""gen_random.py's Qwen3.5 checkpoints (gen_random.py --arch qwen3.5 [--shape SHAPE]).

Usage: tests/reference/gen_random.py --arch qwen3.5 [--shape qwen35-tiny|qwen3.5-0.8b] [--text-only]
       [--seed N] [--dtype f32|bf16|f16] [--tokenizer NAME_OR_DIR] [--vocab N] -o DIR

Default layout: Qwen3_5ForConditionalGeneration as published (text_config, tensors under
model.language_model.*, plus a small random vision tower model.visual.* and a multi-token-
prediction head mtp.* that the converter must skip). --text-only writes Qwen3_5ForCausalLM
(tensors under model.*).
Shapes: qwen35-tiny (4 layers, linear/full alternating through full_attention_interval 2,
head_dim 64 with 16 rotary dims, 2 key heads serving 4 value heads in the DeltaNet layers);
qwen3.5-0.8b (Qwen/Qwen3.5-0.8B's text config: 24 layers [L,L,L,F]x6, dim 1024, vocab 248320).
Scales: the tiny shape's gains (proj/qkv/z/out gains, conv_std) keep KL(f32 || Q4_0 weights)
under ~0.07 on 40-token prompts (seeds 0, 41) while changing the first 30 tokens still moves the
last logits by KL ~0.2-0.3 (the DeltaNet projections are the most Q4-sensitive matrices: with
the default gains Q4_0 alone gave KL up to 0.7). The 24-layer 0.8B shape sits near the edge of
chaos: at gain 0.2 the layers hardly matter (changing 16 of 24 tokens moves the last logits by
KL 0.000), at 0.28 they do (KL 0.6) but Q4_0 weights alone move the logits by KL up to 0.4, so
its quantized runs are compared with the reference on the same quantized weights with
--act-quant (tests/e2e/e2e.py case_big).
Zero-centered norm weights w ~ N(0, 0.1) (the model multiplies by 1 + w); the DeltaNet
decay is kept slow enough (dt_bias ~ N(-3, 1), A_log ~ N(0, 0.5): exp(g) ~ 0.9-0.99 per token)
for the recurrent state to carry information across hundreds of tokens, so prefill chunking
and the state across a long decode matter to the tests.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from convert import tokenizer as ctok
from gen_common import LOGIT_STD, NORM_STD, PROG, PROJ_GAIN, QK_GAIN, REPO, Spec
from gen_common import add_common_args, load_tokenizer, size_config, write_checkpoint

# fmt: off
TINY = dict(dim=128, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=64, ffn=256, nk=2, nv=4,
            kdim=32, vdim=32, conv=4, interval=2, theta=10000000.0, prf=0.25, vocab=151936,
            max_pos=262144, tied=True, proj_gain=0.35, qk_gain=1.5, logit_std=1.5, qkv_gain=0.3,
            z_gain=0.3, conv_std=0.4, out_gain=0.45)
SHAPES: dict[str, dict] = {
    "qwen35-tiny": TINY,
    "qwen3.5-0.8b": dict(dim=1024, n_layers=24, n_heads=8, n_kv_heads=2, head_dim=256, ffn=3584,
                         nk=16, nv=16, kdim=128, vdim=128, conv=4, interval=4, theta=10000000.0,
                         prf=0.25, vocab=248320, max_pos=262144, tied=True, explicit_types=True,
                         proj_gain=0.28, qk_gain=1.2, logit_std=1.5, qkv_gain=0.25, z_gain=0.3,
                         conv_std=0.35, out_gain=0.35),
}
# fmt: on


def text_config(s: dict, n_vocab: int, text_only: bool) -> dict:
    n = s["n_layers"]
    c = {
        "model_type": "qwen3_5_text",
        "vocab_size": n_vocab,
        **size_config(s),
        "hidden_act": "silu",
        "attention_bias": False,
        "attn_output_gate": True,
        "rms_norm_eps": 1e-6,
        "max_position_embeddings": s["max_pos"],
        "tie_word_embeddings": s["tied"],
        "linear_num_key_heads": s["nk"],
        "linear_num_value_heads": s["nv"],
        "linear_key_head_dim": s["kdim"],
        "linear_value_head_dim": s["vdim"],
        "linear_conv_kernel_dim": s["conv"],
        "full_attention_interval": s["interval"],
        "mtp_num_hidden_layers": 0 if text_only else 1,
        "rope_parameters": {
            "rope_type": "default",
            "rope_theta": s["theta"],
            "partial_rotary_factor": s["prf"],
            "mrope_section": [11, 11, 10],
            "mrope_interleaved": True,
        },
        "eos_token_id": None,
        "dtype": "bfloat16",
    }
    if s.get("explicit_types"):
        c["layer_types"] = [
            "full_attention" if (i + 1) % s["interval"] == 0 else "linear_attention"
            for i in range(n)
        ]
    return c


def tensor_specs(s: dict, n_vocab: int, text_only: bool) -> dict[str, Spec]:
    """HF name -> (shape, std[, mean])."""
    d, hd, f = s["dim"], s["head_dim"], s["ffn"]
    g, qk = s.get("proj_gain", PROJ_GAIN), s.get("qk_gain", QK_GAIN)
    kd, vd = s["nk"] * s["kdim"], s["nv"] * s["vdim"]
    base = "model." if text_only else "model.language_model."
    specs: dict[str, Spec] = {
        base + "embed_tokens.weight": ((n_vocab, d), s.get("logit_std", LOGIT_STD) / np.sqrt(d))
    }
    for i in range(s["n_layers"]):
        p = f"{base}layers.{i}."
        specs[p + "input_layernorm.weight"] = ((d,), NORM_STD)
        if (i + 1) % s["interval"]:
            a = p + "linear_attn."
            specs[a + "in_proj_qkv.weight"] = ((2 * kd + vd, d), s.get("qkv_gain", g) / np.sqrt(d))
            specs[a + "in_proj_z.weight"] = ((vd, d), s.get("z_gain", 1.0) / np.sqrt(d))
            specs[a + "in_proj_b.weight"] = ((s["nv"], d), 1.0 / np.sqrt(d))
            specs[a + "in_proj_a.weight"] = ((s["nv"], d), 0.5 / np.sqrt(d))
            specs[a + "conv1d.weight"] = ((2 * kd + vd, 1, s["conv"]), s.get("conv_std", 0.6))
            specs[a + "dt_bias"] = ((s["nv"],), 1.0, -3.0)
            specs[a + "A_log"] = ((s["nv"],), 0.5)
            specs[a + "norm.weight"] = ((s["vdim"],), NORM_STD, 1.0)
            specs[a + "out_proj.weight"] = ((d, vd), s.get("out_gain", g) / np.sqrt(vd))
        else:
            a = p + "self_attn."
            specs[a + "q_proj.weight"] = ((2 * s["n_heads"] * hd, d), qk / np.sqrt(d))
            specs[a + "k_proj.weight"] = ((s["n_kv_heads"] * hd, d), qk / np.sqrt(d))
            specs[a + "v_proj.weight"] = ((s["n_kv_heads"] * hd, d), g / np.sqrt(d))
            specs[a + "o_proj.weight"] = ((d, s["n_heads"] * hd), g / np.sqrt(s["n_heads"] * hd))
            specs[a + "q_norm.weight"] = ((hd,), NORM_STD)
            specs[a + "k_norm.weight"] = ((hd,), NORM_STD)
        specs[p + "post_attention_layernorm.weight"] = ((d,), NORM_STD)
        specs[p + "mlp.gate_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.up_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.down_proj.weight"] = ((d, f), g / np.sqrt(f))
    specs[base + "norm.weight"] = ((d,), NORM_STD)
    if not s["tied"]:
        specs["lm_head.weight"] = ((n_vocab, d), s.get("logit_std", LOGIT_STD) / np.sqrt(d))
    if not text_only:  # a token vision tower and MTP head for the converter to skip
        specs["model.visual.patch_embed.proj.weight"] = ((32, 3, 2, 16, 16), 0.02)
        specs["model.visual.blocks.0.attn.qkv.weight"] = ((96, 32), 0.02)
        specs["model.visual.merger.linear_fc2.weight"] = ((d, 128), 0.02)
        specs["mtp.fc.weight"] = ((d, 2 * d), 0.02)
        specs["mtp.layers.0.mlp.gate_proj.weight"] = ((f, d), 0.02)
        specs["mtp.norm.weight"] = ((d,), NORM_STD)
    return specs


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description="Random-weight Qwen3.5 checkpoint (tests/reference/gen_qwen35.py)."
    )
    p.add_argument("--arch", choices=["qwen3.5"], required=True)
    p.add_argument("--shape", choices=list(SHAPES), default="qwen35-tiny")
    p.add_argument("--text-only", action="store_true", help="Qwen3_5ForCausalLM layout (model.*)")
    add_common_args(
        p,
        "tokenizer name under .models/tokenizers or a directory "
        "(default qwen3_5 when fetched, else qwen3)",
        "override the embedding rows",
    )
    a = p.parse_args(argv)
    s = dict(SHAPES[a.shape])
    tok_dir, tj, tc = load_tokenizer(a.tokenizer or default_tokenizer())
    n_vocab = a.vocab or max(s["vocab"], ctok.vocab_size(tj))
    eos_list = eos_ids(tj, tc)
    text = text_config(s, n_vocab, a.text_only)
    text["eos_token_id"] = eos_list[0] if eos_list else None
    cfg = wrap_config(text, s, a.text_only)
    # mean=0.0: this generator has always added a mean, 0 included, which makes the rare -0.0
    # a +0.0 (the checkpoints stay as they were)
    write_checkpoint(
        a.out,
        cfg,
        {"eos_token_id": eos_list, "do_sample": False},
        tok_dir,
        tensor_specs(s, n_vocab, a.text_only),
        a.seed,
        a.dtype,
        mean=0.0,
    )


def default_tokenizer() -> str:
    """qwen3_5 when fetched, else qwen3."""
    if os.path.isdir(os.path.join(REPO, ".models", "tokenizers", "qwen3_5")):
        return "qwen3_5"
    return "qwen3"


def eos_ids(tj: dict, tc: dict) -> list[int]:
    eos = ctok.special_id(tj, tc, "eos_token")
    ids = ctok.token_ids(tj)
    return [e for e in [eos, ids.get("<|im_end|>", -1)] if e >= 0]


def wrap_config(text: dict, s: dict, text_only: bool, moe: bool = False) -> dict:
    """config.json: the text config alone (--text-only) or inside the image-text wrapper
    (gen_moe.py: the MoE classes' names)."""
    kind = "Moe" if moe else ""
    if text_only:
        return {"architectures": [f"Qwen3_5{kind}ForCausalLM"], **text}
    mt = "qwen3_5_moe" if moe else "qwen3_5"
    return {
        "architectures": [f"Qwen3_5{kind}ForConditionalGeneration"],
        "model_type": mt,
        "text_config": text,
        "tie_word_embeddings": s["tied"],
        "image_token_id": 248056,
        "video_token_id": 248057,
        "vision_start_token_id": 248053,
        "vision_end_token_id": 248054,
        "vision_config": {
            "model_type": mt + "_vision",
            "depth": 1,
            "hidden_size": 32,
            "num_heads": 2,
            "intermediate_size": 64,
            "out_hidden_size": s["dim"],
            "patch_size": 16,
            "temporal_patch_size": 2,
            "spatial_merge_size": 2,
            "in_channels": 3,
        },
    }
