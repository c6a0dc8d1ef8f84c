"""The llama-like family for convert.py: Llama, Mistral, Qwen2, Qwen3, SmolLM3 (and SmolLM2,
which is LlamaForCausalLM). Config rules after transformers' configuration_*.py / modeling_*.py:

- qwen2: q/k/v projections always have biases (o_proj and the MLP never). A layer slides when
  use_sliding_window is true, sliding_window is set and its index >= max_window_layers
  (Qwen2Config.__post_init__ nulls sliding_window unless use_sliding_window, then builds
  layer_types); an explicit layer_types list wins over that rule.
- qwen3: as qwen2 for windows, no biases unless attention_bias (which also biases o_proj, so it
  is refused), per-head RMSNorm of q and k (q_norm/k_norm, [head_dim]); head_dim defaults to 128.
- smollm3: no_rope_layers[i] == 1 means layer i USES RoPE, 0 means a NoPE layer; without the list,
  layer i is NoPE when (i + 1) % no_rope_layer_interval == 0 (interval default 4). A layer slides
  only with use_sliding_window, a sliding_window, and layer_types[i] == "sliding_attention" (the
  default layer_types make the NoPE layers slide). rope_theta defaults to 2e6.
- llama (Llama 2/3, TinyLlama, SmolLM2), mistral: one sliding_window (Mistral) for every layer.
RoPE scaling follows modeling_rope_utils.py (hf_config.compute_rope).
"""

from __future__ import annotations

from .. import tokenizer as ctok
from .base import Family, Json, Plan
from ..hf_config import ConvertError, attention_shape, compute_rope, first_ids, merged_ids, req

ARCHS = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "smollm3": "SmolLM3ForCausalLM",
}
DEFAULT_HEAD_DIM = {"qwen3": 128}  # Qwen3Config.head_dim default
DEFAULT_TIED = {"smollm3": True}  # SmolLM3Config.tie_word_embeddings default
WINDOW_ARCHS = ("qwen2", "qwen3", "smollm3")  # per-layer windows (layer_window key)


def check_supported(cfg: Json) -> str:
    """The arch name, or a refusal naming the offending field."""
    mt = cfg.get("model_type")
    if mt not in ARCHS:
        raise ConvertError(f"config.json: model_type '{mt}' is not supported ({', '.join(ARCHS)})")
    archs = cfg.get("architectures") or [ARCHS[mt]]
    if archs != [ARCHS[mt]]:
        raise ConvertError(f"config.json: architectures {archs} is not supported ({ARCHS[mt]})")
    if cfg.get("hidden_act", "silu") != "silu":
        raise ConvertError(f"config.json: hidden_act '{cfg['hidden_act']}' is not supported (silu)")
    # Qwen2's q/k/v biases are hard-wired (no config key); elsewhere attention_bias also biases
    # o_proj, which the runtime does not have.
    if cfg.get("attention_bias") and mt != "qwen2":
        raise ConvertError(
            "config.json: attention_bias true (an o_proj bias besides q/k/v) is not supported"
        )
    if cfg.get("mlp_bias"):
        raise ConvertError("config.json: mlp_bias true is not supported")
    return mt


def layer_rope(cfg: Json, arch: str, n_layers: int) -> list[bool] | None:
    """SmolLM3: per layer, whether RoPE is applied (no_rope_layers: 1 = RoPE, 0 = NoPE)."""
    if arch != "smollm3":
        return None
    flags = cfg.get("no_rope_layers")
    if flags is None:
        interval = int(cfg.get("no_rope_layer_interval") or 4)
        return [(i + 1) % interval != 0 for i in range(n_layers)]
    if not isinstance(flags, list) or len(flags) < n_layers or any(f not in (0, 1) for f in flags):
        raise ConvertError(
            f"config.json: no_rope_layers must list 0/1 for each of the {n_layers} layers"
        )
    return [bool(f) for f in flags[:n_layers]]


def layer_window(cfg: Json, arch: str, n_layers: int, rope: list[bool] | None) -> list[int] | None:
    """Per-layer sliding window (0 = full attention) for the families that have one."""
    if arch not in WINDOW_ARCHS:
        return None
    use = bool(cfg.get("use_sliding_window", False))
    sw = cfg.get("sliding_window") if use else None
    types = cfg.get("layer_types")
    if types is None:
        if arch == "smollm3":
            types = [
                "sliding_attention" if sw and not rope[i] else "full_attention"
                for i in range(n_layers)
            ]
        else:
            mwl = int(cfg.get("max_window_layers", 28))
            types = [
                "sliding_attention" if sw is not None and i >= mwl else "full_attention"
                for i in range(n_layers)
            ]
    if not isinstance(types, list) or len(types) != n_layers:
        raise ConvertError(
            f"config.json: layer_types must have num_hidden_layers ({n_layers}) entries"
        )
    out = []
    for i, t in enumerate(types):
        if t not in ("full_attention", "sliding_attention"):
            raise ConvertError(
                f"config.json: layer_types[{i}] '{t}' is not supported "
                "(full_attention, sliding_attention)"
            )
        if t == "sliding_attention" and not (use and sw):
            raise ConvertError(
                f"config.json: layer_types[{i}] is sliding_attention but use_sliding_window is "
                f"{use} and sliding_window is {cfg.get('sliding_window')}"
            )
        out.append(int(sw) if t == "sliding_attention" else 0)
    return out


def common_config(
    cfg: Json,
    arch: str,
    gen_cfg: Json,
    tok_json: Json,
    tok_cfg: Json,
    default_head_dim: int | None,
    sliding_window: int | None,
) -> Json:
    """The config keys every llama-like family writes (moe.py's Qwen3-MoE too): shapes, RoPE,
    special ids, the chat template; arch is the name written."""
    dim, n_heads, n_kv, head_dim = attention_shape(cfg, "", default_head_dim)
    rope_freqs, attn = compute_rope(cfg, head_dim)
    bos = first_ids(cfg.get("bos_token_id"), gen_cfg.get("bos_token_id"))
    bos_id = bos[0] if bos else ctok.special_id(tok_json, tok_cfg, "bos_token")
    eos = merged_ids(cfg.get("eos_token_id"), gen_cfg.get("eos_token_id"))
    if not eos and ctok.special_id(tok_json, tok_cfg, "eos_token") >= 0:
        eos = [ctok.special_id(tok_json, tok_cfg, "eos_token")]
    tied = cfg.get("tie_word_embeddings", DEFAULT_TIED.get(arch, False))
    # fmt: off
    return {
        "arch": arch, "n_vocab": int(req(cfg, "vocab_size")), "dim": dim,
        "n_layers": int(req(cfg, "num_hidden_layers")), "n_heads": n_heads, "n_kv_heads": n_kv,
        "head_dim": head_dim, "ffn_dim": int(req(cfg, "intermediate_size")),
        "norm_eps": float(cfg.get("rms_norm_eps", 1e-6)),
        "rope_freqs": rope_freqs, "rope_attn_factor": attn,
        "max_ctx": int(cfg.get("max_position_embeddings", 2048)),
        "sliding_window": int(sliding_window or 0), "tie_embeddings": bool(tied),
        "bos_id": bos_id, "eos_ids": eos,
        "chat_template": ctok.guess_chat_template(tok_json, tok_cfg),
    }
    # fmt: on


class LlamaFamily(Family):
    name = "llama"
    model_types = ARCHS
    records_skipped = False  # the source record predates skipped towers

    def matches(self, cfg: Json) -> bool:
        return True  # the fallback: check_supported names what is not supported

    def normalize_config(self, cfg: Json, gen_cfg: Json, tok_json: Json, tok_cfg: Json) -> Json:
        """docs/format.md's config keys from a Hugging Face config.json."""
        arch = check_supported(cfg)
        sw = cfg.get("sliding_window") if arch == "mistral" else None
        c = common_config(cfg, arch, gen_cfg, tok_json, tok_cfg, DEFAULT_HEAD_DIM.get(arch), sw)
        n_layers = c["n_layers"]
        if arch in WINDOW_ARCHS:
            rope = layer_rope(cfg, arch, n_layers)
            c["qkv_bias"] = arch == "qwen2"
            c["qk_norm"] = arch == "qwen3"
            c["layer_window"] = layer_window(cfg, arch, n_layers, rope)
            if rope is not None:
                c["layer_rope"] = rope
        return c

    def layout(self, names: set[str]) -> tuple[str, str]:
        return "model.", "lm_head.weight"  # a missing embedding is listed with the others

    def layer_plan(self, c: Json, i: int, p: str, h: str) -> Plan:
        d, hd = c["dim"], c["head_dim"]
        qd, kvd = c["n_heads"] * hd, c["n_kv_heads"] * hd
        plan = [
            (p + "attn_norm", h + "input_layernorm.weight", "norm", (d,)),
            (p + "attn_q", h + "self_attn.q_proj.weight", "q", (qd, d)),
            (p + "attn_k", h + "self_attn.k_proj.weight", "k", (kvd, d)),
            (p + "attn_v", h + "self_attn.v_proj.weight", "v", (kvd, d)),
            (p + "attn_output", h + "self_attn.o_proj.weight", "o", (d, qd)),
        ]
        if c.get("qkv_bias"):
            plan += [
                (p + f"attn_{x}_bias", h + f"self_attn.{x}_proj.bias", "norm", (n,))
                for x, n in (("q", qd), ("k", kvd), ("v", kvd))
            ]
        if c.get("qk_norm"):
            plan += [
                (p + f"attn_{x}_norm", h + f"self_attn.{x}_norm.weight", "norm", (hd,))
                for x in ("q", "k")
            ]
        plan.append((p + "ffn_norm", h + "post_attention_layernorm.weight", "norm", (d,)))
        return plan + self.ffn_plan(c, i, p, h)

    def check_heads(self, shapes: dict[str, tuple[int, ...]], c: Json) -> None:
        for proj, key, heads in (
            ("q", "num_attention_heads", c["n_heads"]),
            ("k", "num_key_value_heads", c["n_kv_heads"]),
        ):
            w = shapes[f"model.layers.0.self_attn.{proj}_proj.weight"] if c["n_layers"] else None
            if w is not None and tuple(w) != (heads * c["head_dim"], c["dim"]):
                raise ConvertError(
                    f"head_dim*{key} = {c['head_dim']}*{heads} does not match {proj}_proj "
                    f"shape {list(w)} (hidden_size {c['dim']})"
                )


LLAMA = LlamaFamily()
