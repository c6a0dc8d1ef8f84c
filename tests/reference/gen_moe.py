"""gen_random.py's Mixture-of-Experts checkpoints (gen_random.py --arch qwen3_moe|qwen3_5_moe).

Usage: tests/reference/gen_random.py --arch qwen3_moe|qwen3_5_moe [--shape SHAPE]
       [--experts per-expert|fused] [--close-router] [--text-only] [--seed N]
       [--dtype f32|bf16|f16] [--tokenizer NAME_OR_DIR] [--vocab N] -o DIR

Shapes: qwen3moe-tiny (Qwen3MoeForCausalLM: dim 64, 4 heads, 2 KV heads, head_dim 16, 4 layers,
8 experts, top-2 renormalized, expert ffn 32; mlp_only_layers [1] makes layer 1 a dense MLP of
ffn 128, the others sparse; qwen3moe-tiny-sparse: every layer sparse, as llama.cpp's GGUF
must have it); qwen35moe-tiny (Qwen3.5-MoE: gen_qwen35.py's qwen35-tiny layers,
DeltaNet and gated attention alternating, each with a sparse block of 8 experts, top-2,
expert ffn 32, and a shared expert of ffn 64; the image-text layout with a token vision tower
and MTP head, or --text-only).
--experts: how the checkpoint stores the experts: per expert
mlp.experts.E.{gate,up,down}_proj.weight (the Qwen3-MoE hub files; the qwen3_moe default) or fused
mlp.experts.gate_up_proj [E, 2I, H] and mlp.experts.down_proj [E, H, I] (the Qwen3.5-MoE hub
files; the qwen3_5_moe default). Both hold the same values (each expert's matrices come from the
per-expert name's RNG stream), so they convert to the same .mlb.
--close-router: in every sparse layer the router rows of experts 0 and 1 are equal (an exact tie:
torch.topk keeps the lower index, expert 0) and expert 3's row is expert 2's plus a vector of
1e-3 of its norm (a near tie, decided either way by the token): a top-k that mishandles ties or
near ties changes the logits. With --dtype bf16 the near tie may round to an exact one.
Scales: experts as the dense MLP (gain/sqrt(in)), router rows N(0, 1.5/sqrt(dim)) (router logits
of std ~1.5, so the choice of experts is clear-cut except at the planted ties).
"""

from __future__ import annotations

import argparse

import numpy as np

import gen_qwen35
from convert import tokenizer as ctok
from gen_common import LOGIT_STD, NORM_STD, PROG, PROJ_GAIN, QK_GAIN, Spec
from gen_common import add_common_args, attn_specs, full_tensor, load_tokenizer, size_config
from gen_common import write_checkpoint

ARCHES = ("qwen3_moe", "qwen3_5_moe")
ROUTER_GAIN = 1.5
NEAR_TIE = 1e-3
# fmt: off
SHAPES: dict[str, dict] = {
    "qwen3moe-tiny": dict(arch="qwen3_moe", dim=64, n_layers=4, n_heads=4, n_kv_heads=2,
                          head_dim=16, ffn=128, experts=8, k=2, moe_ffn=32, mlp_only=[1],
                          sparse_step=1, norm_topk=True, theta=1000000.0, eps=1e-6,
                          max_pos=40960, vocab=151936, tied=False, tok="qwen3"),
    "qwen3moe-tiny-sparse": dict(arch="qwen3_moe", dim=64, n_layers=4, n_heads=4, n_kv_heads=2,
                                 head_dim=16, ffn=128, experts=8, k=2, moe_ffn=32, mlp_only=[],
                                 sparse_step=1, norm_topk=True, theta=1000000.0, eps=1e-6,
                                 max_pos=40960, vocab=151936, tied=False, tok="qwen3"),
    # The benchmark shapes (docs/benchmarks.md), with --layers for as many as a machine holds:
    # Qwen3-30B-A3B's (48 layers) and Qwen3.5-35B-A3B's (40 layers, DeltaNet on 3 of 4).
    "qwen3-30b-a3b": dict(arch="qwen3_moe", dim=2048, n_layers=48, n_heads=32, n_kv_heads=4,
                          head_dim=128, ffn=6144, experts=128, k=8, moe_ffn=768, mlp_only=[],
                          sparse_step=1, norm_topk=True, theta=1000000.0, eps=1e-6,
                          max_pos=40960, vocab=151936, tied=False, tok="qwen3"),
    "qwen3.5-35b-a3b": dict(gen_qwen35.SHAPES["qwen3.5-0.8b"], arch="qwen3_5_moe", dim=2048,
                            n_layers=40, n_heads=16, n_kv_heads=2, head_dim=256, nk=16, nv=32,
                            experts=256, k=8, moe_ffn=512, shared_ffn=512, tied=False),
    "qwen35moe-tiny": dict(gen_qwen35.TINY, arch="qwen3_5_moe", experts=8, k=2, moe_ffn=32,
                           shared_ffn=64),
}
# fmt: on
DEFAULT_SHAPE = {"qwen3_moe": "qwen3moe-tiny", "qwen3_5_moe": "qwen35moe-tiny"}


def expert_specs(
    h: str, s: dict, seed: int, dtype: str, fused: bool, close: bool
) -> dict[str, Spec | np.ndarray]:
    """The sparse block of HF layer prefix h: router, experts (per expert or fused) and, with
    shared_ffn, the shared expert and its gate."""
    d, f, n, g = s["dim"], s["moe_ffn"], s["experts"], s.get("proj_gain", PROJ_GAIN)
    m = h + "mlp."
    router_spec = ((n, d), ROUTER_GAIN / np.sqrt(d))
    out: dict[str, Spec | np.ndarray] = {m + "gate.weight": router_spec}
    if close:
        r = full_tensor(seed, m + "gate.weight", router_spec, dtype)
        r[1] = r[0]
        step = np.random.default_rng([seed, n]).standard_normal(d).astype(np.float32)
        r[3] = r[2] + step * np.float32(NEAR_TIE * np.linalg.norm(r[2]) / np.linalg.norm(step))
        out[m + "gate.weight"] = r
    parts = {
        "gate": ((f, d), g / np.sqrt(d)),
        "up": ((f, d), g / np.sqrt(d)),
        "down": ((d, f), g / np.sqrt(f)),
    }
    per = {(e, k): f"{m}experts.{e}.{k}_proj.weight" for e in range(n) for k in parts}
    if not fused:
        out.update({per[e, k]: parts[k] for e in range(n) for k in parts})
    else:

        def w(e: int, k: str) -> np.ndarray:
            return full_tensor(seed, per[e, k], parts[k], dtype)

        out[m + "experts.gate_up_proj"] = np.stack(
            [np.concatenate([w(e, "gate"), w(e, "up")]) for e in range(n)]
        )
        out[m + "experts.down_proj"] = np.stack([w(e, "down") for e in range(n)])
    if s.get("shared_ffn"):
        sf = s["shared_ffn"]
        out[m + "shared_expert_gate.weight"] = ((1, d), 1.0 / np.sqrt(d))
        out[m + "shared_expert.gate_proj.weight"] = ((sf, d), g / np.sqrt(d))
        out[m + "shared_expert.up_proj.weight"] = ((sf, d), g / np.sqrt(d))
        out[m + "shared_expert.down_proj.weight"] = ((d, sf), g / np.sqrt(sf))
    return out


def qwen3_moe_sparse(s: dict) -> list[bool]:
    return [
        i not in s["mlp_only"] and (i + 1) % s["sparse_step"] == 0 for i in range(s["n_layers"])
    ]


def qwen3_moe(s: dict, n_vocab: int, a: argparse.Namespace) -> tuple[dict, dict]:
    """(config.json, tensor specs) of a Qwen3MoeForCausalLM checkpoint."""
    cfg = {
        "architectures": ["Qwen3MoeForCausalLM"],
        "model_type": "qwen3_moe",
        "vocab_size": n_vocab,
        **size_config(s),
        "moe_intermediate_size": s["moe_ffn"],
        "num_experts": s["experts"],
        "num_experts_per_tok": s["k"],
        "norm_topk_prob": s["norm_topk"],
        "decoder_sparse_step": s["sparse_step"],
        "mlp_only_layers": s["mlp_only"],
        "hidden_act": "silu",
        "attention_bias": False,
        "rms_norm_eps": s["eps"],
        "rope_theta": s["theta"],
        "max_position_embeddings": s["max_pos"],
        "use_sliding_window": False,
        "sliding_window": None,
        "tie_word_embeddings": s["tied"],
        "torch_dtype": "bfloat16",
    }
    d, hd, f = s["dim"], s["head_dim"], s["ffn"]
    specs: dict = {"model.embed_tokens.weight": ((n_vocab, d), LOGIT_STD / np.sqrt(d))}
    fused = a.experts == "fused"
    for i, sparse in enumerate(qwen3_moe_sparse(s)):
        p = f"model.layers.{i}."
        specs[p + "input_layernorm.weight"] = ((d,), NORM_STD, 1.0)
        specs.update(attn_specs(p, s, QK_GAIN, PROJ_GAIN))
        specs[p + "self_attn.q_norm.weight"] = ((hd,), NORM_STD, 1.0)
        specs[p + "self_attn.k_norm.weight"] = ((hd,), NORM_STD, 1.0)
        specs[p + "post_attention_layernorm.weight"] = ((d,), NORM_STD, 1.0)
        if sparse:
            specs.update(expert_specs(p, s, a.seed, a.dtype, fused, a.close_router))
        else:
            specs[p + "mlp.gate_proj.weight"] = ((f, d), PROJ_GAIN / np.sqrt(d))
            specs[p + "mlp.up_proj.weight"] = ((f, d), PROJ_GAIN / np.sqrt(d))
            specs[p + "mlp.down_proj.weight"] = ((d, f), PROJ_GAIN / np.sqrt(f))
    specs["model.norm.weight"] = ((d,), NORM_STD, 1.0)
    if not s["tied"]:
        specs["lm_head.weight"] = ((n_vocab, d), LOGIT_STD / np.sqrt(d))
    return cfg, specs


def qwen35_moe(s: dict, n_vocab: int, a: argparse.Namespace) -> tuple[dict, dict]:
    """(config.json, tensor specs) of a Qwen3.5-MoE checkpoint: gen_qwen35.py's, with each
    layer's dense MLP replaced by the sparse block."""
    text = gen_qwen35.text_config(s, n_vocab, a.text_only)
    del text["intermediate_size"]
    text.update(
        model_type="qwen3_5_moe_text",
        num_experts=s["experts"],
        num_experts_per_tok=s["k"],
        moe_intermediate_size=s["moe_ffn"],
        shared_expert_intermediate_size=s["shared_ffn"],
        router_aux_loss_coef=0.001,
    )
    base = "model." if a.text_only else "model.language_model."
    specs: dict = {}
    for name, spec in gen_qwen35.tensor_specs(s, n_vocab, a.text_only).items():
        if name.startswith(base + "layers.") and ".mlp." in name:
            if name.endswith("mlp.gate_proj.weight"):  # the dense MLP's place: the experts
                h = name[: -len("mlp.gate_proj.weight")]
                specs.update(
                    expert_specs(h, s, a.seed, a.dtype, a.experts == "fused", a.close_router)
                )
            continue
        specs[name] = spec
    return gen_qwen35.wrap_config(text, s, a.text_only, moe=True), specs


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(
        prog=PROG, description="Random-weight MoE checkpoint (tests/reference/gen_moe.py)."
    )
    p.add_argument("--arch", choices=ARCHES, required=True)
    p.add_argument("--shape", choices=list(SHAPES))
    p.add_argument("--experts", choices=["per-expert", "fused"], help="the experts' layout")
    p.add_argument("--close-router", action="store_true", help="tie some router rows")
    p.add_argument("--text-only", action="store_true", help="qwen3_5_moe: Qwen3_5MoeForCausalLM")
    p.add_argument("--layers", type=int, help="layers (default: the shape's)")
    add_common_args(p, "tokenizer name under .models/tokenizers or a directory", "embedding rows")
    a = p.parse_args(argv)
    s = dict(SHAPES[a.shape or DEFAULT_SHAPE[a.arch]])
    if s["arch"] != a.arch:
        p.error(f"--shape {a.shape} is a {s['arch']} shape")
    if a.layers:
        s["n_layers"] = a.layers
    qwen3 = a.arch == "qwen3_moe"
    a.experts = a.experts or ("per-expert" if qwen3 else "fused")
    tok_dir, tj, tc = load_tokenizer(
        a.tokenizer or (s["tok"] if qwen3 else gen_qwen35.default_tokenizer())
    )
    n_vocab = a.vocab or max(s["vocab"], ctok.vocab_size(tj))
    if qwen3:
        cfg, specs = qwen3_moe(s, n_vocab, a)
        eos = ctok.special_id(tj, tc, "eos_token")
        cfg["eos_token_id"] = eos if eos >= 0 else None
        gen_cfg = {"eos_token_id": [eos] if eos >= 0 else [], "do_sample": False}
    else:
        cfg, specs = qwen35_moe(s, n_vocab, a)
        eos_list = gen_qwen35.eos_ids(tj, tc)
        (cfg if a.text_only else cfg["text_config"])["eos_token_id"] = (
            eos_list[0] if eos_list else None
        )
        gen_cfg = {"eos_token_id": eos_list, "do_sample": False}
    write_checkpoint(a.out, cfg, gen_cfg, tok_dir, specs, a.seed, a.dtype, mean=0.0)
