"""Reference (oracle) forward of the Mixture-of-Experts language models in numpy: Qwen3-MoE
(model_type qwen3_moe) and Qwen3.5-MoE (qwen3_5_moe, qwen3_5_moe_text); ref_forward.py
dispatches here. The layers around the MLP are ref_llama.py's (Qwen3 attention with q/k norms)
and ref_qwen35.py's (DeltaNet and gated attention); this file gives them the sparse block.

Written from transformers' modeling_qwen3_moe.py (Qwen3MoeSparseMoeBlock, Qwen3MoeDecoderLayer)
and modeling_qwen3_5_moe.py (Qwen3_5MoeTopKRouter, Qwen3_5MoeExperts, Qwen3_5MoeSparseMoeBlock),
reading config.json and the safetensors directly, never the .mlb nor the converter's families:

  logits_r = x Wr^T                      (mlp.gate.weight [E, hidden], no bias)
  p = softmax(logits_r) over all E       (float32 in transformers: dtype=torch.float)
  top = the k = num_experts_per_tok largest p; among equal p the lower expert index first
        (torch.topk on CPU; route() sorts stably)
  w = p[top] / sum(p[top]) when normalized (Qwen3-MoE: norm_topk_prob, default false;
      Qwen3.5-MoE: always), else p[top]
  out = sum_j w_j * down_e(silu(gate_e(x)) * up_e(x)),  e = top_j
  Qwen3.5-MoE: out += sigmoid(x . w_sg) * down_s(silu(gate_s(x)) * up_s(x))  (shared expert,
      mlp.shared_expert_gate.weight [1, hidden])
Qwen3-MoE's layer i is sparse when i is not in mlp_only_layers, num_experts > 0 and
(i + 1) % decoder_sparse_step == 0; otherwise it has the dense MLP (intermediate_size). Every
Qwen3.5-MoE layer is sparse.
The experts are read in either checkpoint layout: per expert mlp.experts.E.{gate,up,down}_proj
.weight, or fused mlp.experts.gate_up_proj [E, 2I, H] (gate rows first) and mlp.experts.down_proj
[E, H, I]. With --quantized-weights each expert's matrices go through the type of their class
(gate, up, down) as 2-D matrices; the router and the shared expert's gate stay as stored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

import ref_llama
import ref_qwen35
from ref_common import Options, Weights, load_config, sigmoid, silu

QWEN3_MOE = ("qwen3_moe",)
QWEN35_MOE = ("qwen3_5_moe", "qwen3_5_moe_text")
MODEL_TYPES = QWEN3_MOE + QWEN35_MOE
Matmul = Callable[[np.ndarray, np.ndarray, str], np.ndarray]  # (x, w, name for its class)


def route(logits: np.ndarray, k: int, normalize: bool) -> tuple[np.ndarray, np.ndarray]:
    """(expert indices [T, k], weights [T, k]) from router logits [T, E]: softmax over all
    experts, the k largest probabilities (equal ones: lower index first), renormalized to sum
    1 when normalize."""
    z = np.exp(logits - logits.max(-1, keepdims=True))
    p = z / z.sum(-1, keepdims=True)
    top = np.argsort(-p, axis=-1, kind="stable")[:, :k]
    w = np.take_along_axis(p, top, axis=-1)
    if normalize:
        w = w / w.sum(-1, keepdims=True)
    return top, w


def plain_mm(x: np.ndarray, w: np.ndarray, name: str) -> np.ndarray:
    return x @ w.T


@dataclass
class MoeWeights:
    """One sparse block: router [E, H], gate/up [E, I, H], down [E, H, I]; shared expert (or
    None): gate/up [Is, H], down [H, Is], its gate [1, H]. names: per expert and part, the name
    whose matrix class the matmul of act-quant runs looks up."""

    router: np.ndarray
    gate: np.ndarray
    up: np.ndarray
    down: np.ndarray
    shared: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None
    prefix: str = ""

    def name(self, e: int | str, part: str) -> str:
        return f"{self.prefix}experts.{e}.{part}_proj.weight"


def moe_block(
    x: np.ndarray, m: MoeWeights, k: int, normalize: bool, mm: Matmul = plain_mm
) -> np.ndarray:
    """The sparse MoE block on x [T, H] (transformers' loop over the experts hit)."""
    top, w = route(mm(x, m.router, m.prefix + "gate.weight"), k, normalize)
    out = np.zeros_like(x)
    for e in np.unique(top):
        tok, slot = np.nonzero(top == e)
        xe = x[tok]
        y = silu(mm(xe, m.gate[e], m.name(e, "gate"))) * mm(xe, m.up[e], m.name(e, "up"))
        np.add.at(out, tok, mm(y, m.down[e], m.name(e, "down")) * w[tok, slot][:, None])
    if m.shared is not None:
        g, u, d, sg = m.shared
        s = m.prefix + "shared_expert."
        y = silu(mm(x, g, s + "gate_proj.weight")) * mm(x, u, s + "up_proj.weight")
        y = mm(y, d, s + "down_proj.weight")
        out = out + sigmoid(mm(x, sg, m.prefix + "shared_expert_gate.weight")) * y
    return out


def load_block(W: Weights, h: str, n: int, f: int) -> MoeWeights:
    """The sparse block of HF layer prefix h (n experts of f rows) in either layout."""
    m = h + "mlp."
    if W.has(m + "experts.gate_up_proj"):
        gu = W.ck.get(m + "experts.gate_up_proj")  # [E, 2I, H]: gate rows, then up rows
        down = W.ck.get(m + "experts.down_proj")

        def part(e: int, k: str) -> np.ndarray:
            return {"gate": gu[e, :f], "up": gu[e, f:], "down": down[e]}[k]

    else:

        def part(e: int, k: str) -> np.ndarray:
            return W.ck.get(f"{m}experts.{e}.{k}_proj.weight")

    mats = {
        k: np.stack([W.matrix(part(e, k), k) for e in range(n)]) for k in ("gate", "up", "down")
    }
    shared = None
    if W.has(m + "shared_expert_gate.weight"):
        s = m + "shared_expert."
        shared = (
            W(s + "gate_proj.weight"),
            W(s + "up_proj.weight"),
            W(s + "down_proj.weight"),
            W(m + "shared_expert_gate.weight"),
        )
    return MoeWeights(W(m + "gate.weight"), mats["gate"], mats["up"], mats["down"], shared, m)


def sparse_layers(cfg: dict[str, Any]) -> list[bool]:
    """Which layers have the sparse block (Qwen3MoeDecoderLayer's rule; Qwen3.5-MoE: all)."""
    n = cfg["num_hidden_layers"]
    if cfg["model_type"] not in QWEN3_MOE:
        return [True] * n
    step, only = cfg.get("decoder_sparse_step", 1), cfg.get("mlp_only_layers") or []
    experts = cfg.get("num_experts", 128)
    return [i not in only and experts > 0 and (i + 1) % step == 0 for i in range(n)]


def forward(d: str, tokens: list[int], opt: Options) -> np.ndarray:
    cfg = load_config(d)
    text = ref_qwen35.text_of(cfg)
    sparse = sparse_layers(text)
    if cfg["model_type"] in QWEN3_MOE:
        n, k = cfg.get("num_experts", 128), cfg.get("num_experts_per_tok", 8)
        f, normalize = cfg.get("moe_intermediate_size", 768), cfg.get("norm_topk_prob", False)

        def ffn(W: Weights, mm: Callable, p: str, layer: int, x: np.ndarray) -> np.ndarray:
            if not sparse[layer]:
                return ref_llama.swiglu(W, mm, p, layer, x)
            return moe_block(x, load_block(W, p, n, f), k, normalize, by_name(mm))

        return ref_llama.forward(d, tokens, opt, ffn)
    n, k = text.get("num_experts", 256), text.get("num_experts_per_tok", 8)
    f = text.get("moe_intermediate_size", 512)

    def ffn35(W: Weights, mm: Callable, p: str, layer: int, x: np.ndarray) -> np.ndarray:
        return moe_block(x, load_block(W, p, n, f), k, True, by_name(mm))

    return ref_qwen35.forward(d, tokens, opt, ffn35)


def by_name(mm: Callable) -> Matmul:
    """moe_block's matmul from the forward's mm(x, name, w) (act-quant by the name's class)."""
    return lambda x, w, name: mm(x, name, w)
