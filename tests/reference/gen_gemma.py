"""gen_random.py's Gemma 2 / Gemma 3 checkpoints (gen_random.py --arch gemma2|gemma3|gemma3-vl).

Usage: tests/reference/gen_random.py --arch gemma2|gemma3|gemma3-vl [--shape SHAPE] [--seed N]
       [--dtype f32|bf16|f16] [--tokenizer NAME_OR_DIR] [--vocab N] [--vl-layout hub|v5] -o DIR

Shapes (SHAPES): gemma2-tiny, gemma3-tiny, gemma3-vl-tiny (the defaults of the three arches),
gemma2-2b, gemma3-1b (benchmark shapes). The tiny ones exercise every Gemma feature on a
40-token prompt: head_dim 64 with dim/n_heads 32, query_pre_attn_scalar != head_dim, a 16-token
sliding window; gemma2-tiny alternates sliding/global layers and has soft-caps small enough
to bite (attention 10, final 12 — real Gemma 2 uses 50 and 30); gemma3-tiny has 6 layers with
sliding_window_pattern 3 (layers 2 and 5 global, the rest local with rope_local_base_freq);
gemma3-vl-tiny is Gemma3ForConditionalGeneration (text_config with an explicit layer_types,
linear rope scaling 8 on the global layers as the 4B+ checkpoints) plus a small random SigLIP
vision tower and projector that the converter must skip; --vl-layout hub names the text model
language_model.model.* (the hub checkpoints), v5 model.language_model.*.
The tokenizer is Gemma 3's (.models/tokenizers/gemma3), also for gemma2 (its own 256k vocabulary
is not fetched, so gemma2 shapes get 262144 rows too). vocab is otherwise the real checkpoints'
(262144 for Gemma 3 text-only, 262208 image-text);
--vocab shrinks it for converter tests (token ids past it must then not be fed to a forward).
Norm weights are N(0, 0.1) (Gemma applies 1 + w); other scales as gen_random.py.
"""
from __future__ import annotations

import argparse
import os

import numpy as np

from convert import mlb
from gen_common import LOGIT_STD, NORM_STD, PROG, PROJ_GAIN, QK_GAIN, REPO
from gen_common import TORCH_DTYPE, Spec, add_common_args, load_tokenizer
from gen_common import attn_specs, size_config, write_checkpoint

# fmt: off
ARCHES = {"gemma2": ("gemma2", "Gemma2ForCausalLM", "gemma2-tiny"),
          "gemma3": ("gemma3_text", "Gemma3ForCausalLM", "gemma3-tiny"),
          "gemma3-vl": ("gemma3", "Gemma3ForConditionalGeneration", "gemma3-vl-tiny")}
TINY = dict(dim=128, n_heads=4, n_kv_heads=2, head_dim=64, ffn=384, window=16, qpas=32,
            proj_gain=0.4, qk_gain=0.7, logit_std=1.6)
SHAPES: dict[str, dict] = {
    "gemma2-tiny": dict(TINY, n_layers=4, vocab=262144, theta=10000.0, max_pos=8192, qk_gain=2.0,
                        attn_cap=8.0, final_cap=12.0),
    "gemma3-tiny": dict(TINY, n_layers=6, n_kv_heads=1, vocab=262144, theta=1000000.0,
                        local_theta=10000.0, max_pos=32768, pattern=3),
    "gemma3-vl-tiny": dict(TINY, n_layers=6, vocab=262208, theta=1000000.0, local_theta=10000.0,
                           max_pos=131072, pattern=3,
                           rope_scaling={"rope_type": "linear", "factor": 8.0},
                           vision=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=1,
                                       num_attention_heads=2, image_size=28, patch_size=14),
                           mm_tokens=4),
    "gemma2-2b": dict(dim=2304, n_layers=26, n_heads=8, n_kv_heads=4, head_dim=256, ffn=9216,
                      window=4096, qpas=256, vocab=262144, theta=10000.0, max_pos=8192,
                      attn_cap=50.0, final_cap=30.0),
    "gemma3-1b": dict(dim=1152, n_layers=26, n_heads=4, n_kv_heads=1, head_dim=256, ffn=6912,
                      window=512, qpas=256, vocab=262144, theta=1000000.0, local_theta=10000.0,
                      max_pos=32768, pattern=6),
}
# fmt: on
# Post-norm weights w ~ N(POST_NORM_MEAN, 0.1): each sublayer adds ~0.4 of a unit-RMS vector to
# the residual, so Q4_0 noise stays within the e2e KL limit while attention still matters.
POST_NORM_MEAN = -0.6


def text_config(arch: str, s: dict, n_vocab: int, dtype: str) -> dict:
    model_type, _, _ = ARCHES[arch]
    c = {
        "model_type": "gemma2" if arch == "gemma2" else "gemma3_text",
        **size_config(s),
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_act": "gelu_pytorch_tanh",
        "rms_norm_eps": 1e-6,
        "rope_theta": s["theta"],
        "max_position_embeddings": s["max_pos"],
        "query_pre_attn_scalar": s["qpas"],
        "sliding_window": s["window"],
        "vocab_size": n_vocab,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "pad_token_id": 0,
        "bos_token_id": 2,
        "eos_token_id": [1, 106],
        "tie_word_embeddings": True,
        "torch_dtype": TORCH_DTYPE[dtype],
        "use_cache": True,
    }
    if arch == "gemma2":
        c.update(attn_logit_softcapping=s["attn_cap"], final_logit_softcapping=s["final_cap"])
    else:
        c.update(
            rope_local_base_freq=s["local_theta"],
            rope_scaling=s.get("rope_scaling"),
            attn_logit_softcapping=None,
            final_logit_softcapping=None,
        )
        if arch == "gemma3-vl":  # newer saves list the layer types; older ones only the pattern
            c["layer_types"] = [
                "sliding_attention" if (i + 1) % s["pattern"] else "full_attention"
                for i in range(s["n_layers"])
            ]
        else:
            c["sliding_window_pattern"] = s["pattern"]
    return c


def make_config(arch: str, s: dict, n_vocab: int, dtype: str) -> dict:
    model_type, cls, _ = ARCHES[arch]
    text = text_config(arch, s, n_vocab, dtype)
    if arch != "gemma3-vl":
        return {"architectures": [cls], **text, "model_type": model_type}
    v = dict(
        s["vision"],
        model_type="siglip_vision_model",
        layer_norm_eps=1e-6,
        num_channels=3,
        hidden_act="gelu_pytorch_tanh",
        vision_use_head=False,
    )
    for k in ("bos_token_id", "eos_token_id", "pad_token_id", "torch_dtype"):
        text.pop(k)
    return {
        "architectures": [cls],
        "model_type": "gemma3",
        "text_config": text,
        "vision_config": v,
        "boi_token_index": 255999,
        "eoi_token_index": 256000,
        "image_token_index": 262144,
        "mm_tokens_per_image": s["mm_tokens"],
        "eos_token_id": [1, 106],
        "initializer_range": 0.02,
        "torch_dtype": TORCH_DTYPE[dtype],
    }


def vision_specs(s: dict, prefix: str) -> dict[str, Spec]:
    v, d = s["vision"], s["dim"]
    h, f, p = v["hidden_size"], v["intermediate_size"], v["patch_size"]
    n_patches = (v["image_size"] // p) ** 2
    vm = prefix + "vision_tower.vision_model."
    out = {
        vm + "embeddings.patch_embedding.weight": ((h, 3, p, p), 0.02),
        vm + "embeddings.patch_embedding.bias": ((h,), 0.02),
        vm + "embeddings.position_embedding.weight": ((n_patches, h), 0.02),
    }
    for i in range(v["num_hidden_layers"]):
        lp = f"{vm}encoder.layers.{i}."
        for n in ("layer_norm1", "layer_norm2"):
            out[lp + n + ".weight"] = ((h,), NORM_STD)
            out[lp + n + ".bias"] = ((h,), 0.02)
        for n in ("q_proj", "k_proj", "v_proj", "out_proj"):
            out[lp + f"self_attn.{n}.weight"] = ((h, h), 0.02)
            out[lp + f"self_attn.{n}.bias"] = ((h,), 0.02)
        out[lp + "mlp.fc1.weight"], out[lp + "mlp.fc1.bias"] = ((f, h), 0.02), ((f,), 0.02)
        out[lp + "mlp.fc2.weight"], out[lp + "mlp.fc2.bias"] = ((h, f), 0.02), ((h,), 0.02)
    out[vm + "post_layernorm.weight"], out[vm + "post_layernorm.bias"] = ((h,), NORM_STD), (
        (h,),
        0.02,
    )
    out[prefix + "multi_modal_projector.mm_input_projection_weight"] = ((h, d), 0.02)
    out[prefix + "multi_modal_projector.mm_soft_emb_norm.weight"] = ((h,), NORM_STD)
    return out


def tensor_specs(arch: str, s: dict, n_vocab: int, layout: str = "hub") -> dict[str, Spec]:
    """HF name -> (shape, std[, mean]); every tensor is N(mean, std) (mean 0 unless given;
    Gemma norms hold w, the runtime multiplier being 1 + w)."""
    d, hd, f = s["dim"], s["head_dim"], s["ffn"]
    g, qk = s.get("proj_gain", PROJ_GAIN), s.get("qk_gain", QK_GAIN)
    base = "model."
    vis = ""
    if arch == "gemma3-vl":
        base, vis = (
            ("language_model.model.", "")
            if layout == "hub"
            else ("model.language_model.", "model.")
        )
    specs = {
        base + "embed_tokens.weight": ((n_vocab, d), s.get("logit_std", LOGIT_STD) / np.sqrt(d))
    }
    for i in range(s["n_layers"]):
        p = f"{base}layers.{i}."
        specs[p + "input_layernorm.weight"] = ((d,), NORM_STD)
        specs.update(attn_specs(p, s, qk, g))
        if arch != "gemma2":
            specs[p + "self_attn.q_norm.weight"] = ((hd,), NORM_STD)
            specs[p + "self_attn.k_norm.weight"] = ((hd,), NORM_STD)
        specs[p + "post_attention_layernorm.weight"] = (
            (d,),
            NORM_STD,
            s.get("post_norm_mean", POST_NORM_MEAN),
        )
        specs[p + "pre_feedforward_layernorm.weight"] = ((d,), NORM_STD)
        specs[p + "post_feedforward_layernorm.weight"] = (
            (d,),
            NORM_STD,
            s.get("post_norm_mean", POST_NORM_MEAN),
        )
        specs[p + "mlp.gate_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.up_proj.weight"] = ((f, d), g / np.sqrt(d))
        specs[p + "mlp.down_proj.weight"] = ((d, f), g / np.sqrt(f))
    specs[base + "norm.weight"] = ((d,), NORM_STD)
    if arch == "gemma3-vl":
        specs.update(vision_specs(s, vis))
    return specs


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description="Random-weight Gemma 2/3 checkpoint (tests/reference/gen_gemma.py)."
    )
    p.add_argument("--arch", choices=list(ARCHES), required=True)
    p.add_argument("--shape", choices=list(SHAPES), help="default: the arch's tiny shape")
    p.add_argument(
        "--vl-layout",
        choices=["hub", "v5"],
        default="hub",
        help="gemma3-vl tensor names: language_model.model.* (hub) or model.language_model.* (v5)",
    )
    add_common_args(
        p,
        "tokenizer name under .models/tokenizers or a directory (default gemma3)",
        "override the embedding rows (converter tests)",
    )
    a = p.parse_args(argv)
    shape = a.shape or ARCHES[a.arch][2]
    s = dict(SHAPES[shape])
    if (a.arch == "gemma2") != ("attn_cap" in s) or (a.arch == "gemma3" and "vision" in s):
        mlb.die(PROG, f"--shape {shape} does not fit --arch {a.arch}")
    if a.arch == "gemma3-vl" and "vision" not in s:  # e.g. gemma3-1b as an image-text layout
        s.update(vision=SHAPES["gemma3-vl-tiny"]["vision"], mm_tokens=4)
    tok_dir, _, _ = load_tokenizer(
        a.tokenizer or os.path.join(REPO, ".models", "tokenizers", "gemma3")
    )
    n_vocab = a.vocab or s["vocab"]
    gen_cfg = {"bos_token_id": 2, "eos_token_id": [1, 106], "pad_token_id": 0, "do_sample": False}
    # mean=0.0: this generator has always added a mean, 0 included, which makes the rare -0.0
    # a +0.0 (the checkpoints stay as they were)
    write_checkpoint(
        a.out,
        make_config(a.arch, s, n_vocab, a.dtype),
        gen_cfg,
        tok_dir,
        tensor_specs(a.arch, s, n_vocab, a.vl_layout),
        a.seed,
        a.dtype,
        mean=0.0,
    )
