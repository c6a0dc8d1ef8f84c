"""Write a .mlb model as a GGUF file with llama.cpp's names and conventions (numpy only).

Usage: tools/to_gguf.py MODEL.mlb -o OUT.gguf [--quant q4_k|q4_k_m|q4_1|q3_k|iq4_nl|iq4_xs
                                                [--round-trip | --round-trip-out RT.gguf]]
       tools/to_gguf.py TOKENIZER_DIR|TOKENIZER.mlt -o VOCAB.gguf   (vocabulary only)

The tensor data is copied as it is (f32, f16, q8_0 and q4_0 blocks are ggml's layouts), so a
GGUF made from a Q8_0 .mlb holds the same blocks. What changes (after llama.cpp's converter):
- names: `tok_embd` -> `token_embd.weight`, `blk.N.X` -> `blk.N.X.weight`, biases `.bias`;
- llama-architecture q and k rows are permuted from Hugging Face's rotate_half order into the
  interleaved pairs llama.cpp's LLAMA_ROPE_TYPE_NORM rotates;
- the config becomes `{arch}.*` keys, the rope base is recovered from the inverse frequencies
  (llama3-style scaling: the recorded base, and the tensor rope_freqs.weight of divisors);
- the tokenizer becomes tokenizer.ggml.* (SentencePiece-style `llama` vocabularies: tokens,
  scores in the order of tokenizer.json's merges, token types).

--quant q4_k requantizes every matrix to ggml's Q4_K (Q4_1 where a row is not a multiple of
256), --quant q4_k_m likewise but Q6_K (Q8_0 where a row is not a multiple of 256) for the
embedding, output, attn_v and ffn_down (the types a Q4_K_M file mixes), --quant q4_1 to Q4_1,
--quant q3_k to Q3_K (Q4_1 where a row is not a multiple of 256), --quant iq4_nl to IQ4_NL and
--quant iq4_xs to IQ4_XS (IQ4_NL where a row is not a multiple of 256), with quant.py's
plain min/max quantizers (not llama-quantize's: for tests of the K-quant import, not for
quality); --round-trip then writes F32 of the very values those blocks decode to instead, and
--round-trip-out PATH writes that F32 file beside the quantized one from the same pass.
Qwen3.5's tensors are put in llama.cpp's layout (value heads tiled) as F32 first, then quantized.

Supported so far: llama (Llama 2/3, SmolLM2, Mistral without a window), qwen2, qwen3, smollm3,
gemma2 and gemma3 (what llama.cpp's keys can express: its Gemma query-scale rule and sliding
period, SmolLM3's NoPE layer every fourth), with
SentencePiece (`llama`) or byte-level (`gpt2`: llama-bpe, qwen2, qwen35, smollm, gpt-2
pre-tokenizers) vocabularies. Others are refused by name.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np

from . import gguf, mlb, quant
from . import tokenizer as ctok

PROG = "to_gguf.py"
BYTE_PIECE = re.compile(r"^<0x[0-9A-F]{2}>$")


class ToGgufError(Exception):
    pass


def tensor_name(name: str) -> str:
    """The llama.cpp name of a .mlb tensor."""
    if name == "tok_embd":
        return "token_embd.weight"
    if name.endswith("_bias"):
        return name[: -len("_bias")] + ".bias"
    for ours, theirs in (
        ("attn_post_norm", "post_attention_norm"),
        ("ffn_post_norm", "post_ffw_norm"),
    ):
        if name.endswith("." + ours):
            return name[: -len(ours)] + theirs + ".weight"
    return name + ".weight"


def interleave_rows(raw: bytes, rows: int, n_heads: int) -> bytes:
    """Rows of one head in rotate_half order (i, i + hd/2) -> interleaved pairs (2i, 2i + 1),
    as llama.cpp's convert_hf_to_gguf permute(); whole rows move, so quantized blocks survive."""
    hd = rows // n_heads
    order = np.arange(rows).reshape(n_heads, 2, hd // 2).swapaxes(1, 2).reshape(rows)
    a = np.frombuffer(raw, dtype=np.uint8).reshape(rows, -1)
    return a[order].tobytes()


def base_and_factor(freqs: np.ndarray, dim: int) -> tuple[float, float, bool]:
    """(base, linear factor, whether base^(-2i/dim) / factor gives freqs) of inverse RoPE
    frequencies. The base comes from the last frequency (base^-(d-2)/d): the exponent that
    undoes it is near 1, so the float rounding of the stored frequencies hardly moves it (from
    the first two, Qwen3.5's 1e7 came back as 9999999); bases are integers."""
    factor = float(1 / freqs[0])
    base = float((freqs[-1] * factor) ** (-dim / (dim - 2)))
    if abs(base - round(base)) < 1e-6 * base:
        base = float(round(base))
    plain = base ** (-np.arange(0, dim, 2, dtype=np.float64) / dim)
    return base, factor, bool(np.allclose(freqs, plain / factor, rtol=1e-5))


def recorded_theta(source: dict | None) -> float | None:
    """The rope base convert.py recorded in a .mlb's source, if any."""
    theta = ((source or {}).get("rope") or {}).get("theta")
    return float(theta) if theta else None


def rope_base(c: dict, source: dict | None = None) -> tuple[float, float, np.ndarray | None]:
    """(base, linear factor, per-frequency divisors or None) whose inverse frequencies
    base^(-2i/d) / factor / divisor_i are the config's. Linear scaling needs no divisors; any
    other (llama3's) needs the converter's rope base (`theta`, from the .mlb's source) and
    becomes llama.cpp's rope_freqs.weight: F32 divisors of base^(-2i/d), as its converter
    writes for Llama 3.1+."""
    theta = recorded_theta(source)
    freqs = np.asarray(c["rope_freqs"], dtype=np.float64)
    dim = int(c.get("rope_dim", c["head_dim"]))
    if len(freqs) != dim // 2 or dim < 4:
        raise ToGgufError(f"rope_freqs has {len(freqs)} entries, rope_dim {dim} needs {dim // 2}")
    base, factor, ok = base_and_factor(freqs, dim)
    if ok:
        return base, (1.0 if abs(factor - 1) < 1e-9 else factor), None
    if not theta or theta <= 0:
        raise ToGgufError(
            "rope scaling other than linear needs the rope base the converter recorded "
            "(source.rope.theta; convert this model again with tools/convert.py)"
        )
    divisors = theta ** (-np.arange(0, dim, 2, dtype=np.float64) / dim) / freqs
    if not np.all(np.isfinite(divisors) & (divisors > 0)):
        raise ToGgufError("rope_freqs are not positive: no per-frequency divisors give them")
    return theta, 1.0, divisors


def _tokens(tj: dict) -> tuple[list[str], dict[str, int], dict[int, bool]]:
    """Tokens by id (model vocabulary and added tokens), string -> id, added id -> special."""
    pieces = dict(tj["model"]["vocab"])
    special = {}
    for t in tj.get("added_tokens") or []:
        pieces[t["content"]] = t["id"]
        special[t["id"]] = bool(t.get("special"))
    tokens = [""] * (max(pieces.values()) + 1)
    for p, i in pieces.items():
        tokens[i] = p
    return tokens, pieces, special


def _merges(model: dict) -> list[list[str]]:
    return [m.split(" ", 1) if isinstance(m, str) else m for m in model.get("merges") or []]


def _adds_bos(tj: dict, tc: dict) -> bool:
    """tokenizer_config's add_bos_token, else whether the post-processor puts a token first."""
    if "add_bos_token" in tc:
        return bool(tc["add_bos_token"])
    pp = tj.get("post_processor") or {}
    for step in pp.get("processors", [pp]):
        if step.get("type") == "TemplateProcessing":
            return "SpecialToken" in step["single"][0]
    return False


def _special_ids(kv: dict, pieces: dict[str, int], tc: dict) -> None:
    for key, name in (("bos", "bos_token"), ("eos", "eos_token"), ("padding", "pad_token")):
        v = tc.get(name)
        v = v.get("content") if isinstance(v, dict) else v
        if v and v in pieces:
            kv[f"tokenizer.ggml.{key}_token_id"] = pieces[v]
    if tc.get("chat_template"):
        kv["tokenizer.chat_template"] = tc["chat_template"]


def llama_vocab(tj: dict, tc: dict) -> dict:
    """tokenizer.ggml.* of a SentencePiece byte-fallback BPE tokenizer.json (kind `llama`)."""
    model = tj["model"]
    tokens, pieces, special = _tokens(tj)
    unk = pieces.get(model.get("unk_token") or "<unk>", -1)
    # A piece's score is its merge priority (SentencePiece merges the pair whose result scores
    # highest): minus the rank of the first merge that makes it. Pieces no merge makes (single
    # characters) come after all of them.
    merges = _merges(model)
    produced: dict[str, int] = {}
    for rank, (a, b) in enumerate(merges):
        produced.setdefault(a + b, rank)
    types, scores = [], []
    for i, p in enumerate(tokens):
        if i == unk:
            t = gguf.TOKEN_UNKNOWN
        elif i in special:
            t = gguf.TOKEN_CONTROL if special[i] else gguf.TOKEN_USER_DEFINED
        elif BYTE_PIECE.match(p):
            t = gguf.TOKEN_BYTE
        else:
            t = gguf.TOKEN_NORMAL
        types.append(t)
        if p in produced:  # user-defined pieces too (Gemma's runs of "▁" are merged)
            scores.append(-float(produced[p]))
        else:
            scores.append(-float(len(merges) + i) if t == gguf.TOKEN_NORMAL else 0.0)
    normalizers = (tj.get("normalizer") or {}).get("normalizers") or [tj.get("normalizer") or {}]
    kv = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": gguf.Value(gguf.ARRAY, tokens, gguf.STRING),
        "tokenizer.ggml.scores": gguf.Value(gguf.ARRAY, scores, gguf.F32),
        "tokenizer.ggml.token_type": gguf.Value(gguf.ARRAY, types, gguf.I32),
        "tokenizer.ggml.add_bos_token": _adds_bos(tj, tc),
        "tokenizer.ggml.add_eos_token": bool(tc.get("add_eos_token", False)),
        "tokenizer.ggml.add_space_prefix": any(n.get("type") == "Prepend" for n in normalizers),
    }
    _special_ids(kv, pieces, tc)
    if unk >= 0:
        kv["tokenizer.ggml.unknown_token_id"] = unk
    return kv


# llama.cpp's tokenizer.ggml.pre names of the Split regexes of byte-level tokenizer.json files
PRE_REGEXES = {
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}"
    "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "llama-bpe",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}"
    "\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen2",
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?[\\p{L}\\p{M}]+|\\p{N}| ?[^\\s"
    "\\p{L}\\p{M}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+": "qwen35",
}


def pre_name(tj: dict) -> str:
    """The tokenizer.ggml.pre of a byte-level tokenizer.json's pre-tokenizer."""
    pt = tj.get("pre_tokenizer") or {}
    steps = pt.get("pretokenizers", []) if pt.get("type") == "Sequence" else [pt]
    kinds = [st.get("type") for st in steps]
    if kinds == ["Split", "ByteLevel"] and steps[0]["pattern"].get("Regex") in PRE_REGEXES:
        return PRE_REGEXES[steps[0]["pattern"]["Regex"]]
    if kinds == ["Digits", "ByteLevel"] and steps[0].get("individual_digits"):
        return "smollm"
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True):
        return "gpt-2"
    raise ToGgufError(f"tokenizer.json: pre-tokenizer {json.dumps(pt)[:80]} is not recognised")


def bpe_vocab(tj: dict, tc: dict) -> dict:
    """tokenizer.ggml.* of a byte-level BPE tokenizer.json (kind `gpt2`)."""
    tokens, pieces, special = _tokens(tj)
    types = [
        (gguf.TOKEN_CONTROL if special[i] else gguf.TOKEN_USER_DEFINED)
        if i in special
        else gguf.TOKEN_NORMAL
        for i in range(len(tokens))
    ]
    kv = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": pre_name(tj),
        "tokenizer.ggml.tokens": gguf.Value(gguf.ARRAY, tokens, gguf.STRING),
        "tokenizer.ggml.token_type": gguf.Value(gguf.ARRAY, types, gguf.I32),
        "tokenizer.ggml.merges": gguf.Value(
            gguf.ARRAY, [f"{a} {b}" for a, b in _merges(tj["model"])], gguf.STRING
        ),
        "tokenizer.ggml.add_bos_token": _adds_bos(tj, tc),
        "tokenizer.ggml.add_eos_token": bool(tc.get("add_eos_token", False)),
    }
    _special_ids(kv, pieces, tc)
    return kv


def vocab_keys(tj: dict, tc: dict) -> dict:
    model = tj.get("model") or {}
    if model.get("type") != "BPE":
        raise ToGgufError(f"tokenizer.json: model type {model.get('type')} (BPE only)")
    return llama_vocab(tj, tc) if model.get("byte_fallback") else bpe_vocab(tj, tc)


def pad_vocab(kv: dict, n_vocab: int) -> None:
    """Tokens up to the embedding's rows, as llama.cpp's converter pads them (Qwen's embedding
    is larger than its vocabulary; llama.cpp wants one token per row): unused "[PADi]"."""
    tokens = kv["tokenizer.ggml.tokens"].value
    n = len(tokens)
    if n > n_vocab:  # Gemma 3's <image_soft_token> has no embedding row
        for k in ("tokens", "token_type", "scores"):
            if f"tokenizer.ggml.{k}" in kv:
                del kv[f"tokenizer.ggml.{k}"].value[n_vocab:]
        return
    tokens += [f"[PAD{i}]" for i in range(n, n_vocab)]
    kv["tokenizer.ggml.token_type"].value += [gguf.TOKEN_UNUSED] * (n_vocab - n)
    if "tokenizer.ggml.scores" in kv:
        kv["tokenizer.ggml.scores"].value += [0.0] * (n_vocab - n)


# .mlb arch -> llama.cpp's architecture name
GGUF_ARCHS = {
    "llama": "llama",
    "mistral": "llama",
    "qwen2": "qwen2",
    "qwen3": "qwen3",
    "smollm3": "smollm3",
    "gemma2": "gemma2",
    "gemma3": "gemma3",
    "qwen3_5": "qwen35",
    "qwen3_moe": "qwen3moe",
    "qwen3_5_moe": "qwen35moe",
}


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ToGgufError(f"{what}: llama.cpp's GGUF has no way to say it")


def gemma_keys(c: dict, a: str) -> dict:
    """Gemma 2/3: what llama.cpp reads, after refusing what it cannot express (its query scale
    rule, its sliding period, Gemma 3's local RoPE from one base)."""
    g2 = a == "gemma2"
    n, dim, heads, hd = c["n_layers"], c["dim"], c["n_heads"], c["head_dim"]
    _check(c.get("activation") == "gelu_tanh" and c.get("post_norms"), "a Gemma without GELU/norms")
    _check(abs(c["embd_scale"] - float(np.float32(np.sqrt(dim)))) < 1e-6, "embd_scale")
    want = (dim / heads if n == (46 if g2 else 62) else hd) ** -0.5
    _check(abs(c.get("attn_scale", hd**-0.5) - want) < 1e-7, f"attn_scale {c.get('attn_scale')}")
    kv = {f"{a}.final_logit_softcapping": float(c.get("final_softcap", 0.0))}
    if g2:
        kv[f"{a}.attn_logit_softcapping"] = float(c.get("attn_softcap", 0.0))
    windows = c.get("layer_window") or [c.get("sliding_window", 0)] * n
    w = max(windows)
    if w:
        sliding = [x > 0 for x in windows]
        _check(all(x in (0, w) for x in windows), "different sliding windows per layer")
        period = next(
            (p for p in range(1, n + 2) if sliding == [i % p < p - 1 for i in range(n)]), 0
        )
        _check(period > 0, f"sliding layers {sliding}")
        kv[f"{a}.attention.sliding_window"] = w
        kv[f"{a}.attention.sliding_window_pattern"] = period
        if not g2:
            _check(c.get("layer_rope_local") == sliding, "local RoPE on other layers than sliding")
            local = np.asarray(c["rope_freqs_local"], dtype=np.float64)
            base, factor, ok = base_and_factor(local, 2 * len(local))
            _check(ok and abs(factor - 1) < 1e-9, "local RoPE")
            kv[f"{a}.rope.freq_base_swa"] = base
    else:
        _check(g2 is False, "a Gemma 2 without sliding windows")
    return kv


def yarn_keys(c: dict, a: str, source: dict) -> dict:
    """The yarn keys of a .mlb whose converter recorded yarn scaling (source.rope), else {}.
    llama.cpp scales cos/sin by 1 + 0.1 ln(factor) whatever the checkpoint says, so another
    attention factor is refused."""
    rope = source.get("rope") or {}
    sc = rope.get("scaling") or {}
    if sc.get("rope_type", sc.get("type")) != "yarn":
        return {}
    orig = int(rope["original_ctx"])
    factor = float(sc["factor"]) if sc.get("factor") is not None else c["max_ctx"] / orig
    _check(abs(c.get("rope_attn_factor", 1.0) - (0.1 * np.log(factor) + 1)) < 1e-6, "yarn attn")
    kv = {
        f"{a}.rope.scaling.type": "yarn",
        f"{a}.rope.scaling.factor": factor,
        f"{a}.rope.scaling.original_context_length": orig,
    }
    for key, name in (("beta_fast", "yarn_beta_fast"), ("beta_slow", "yarn_beta_slow")):
        if sc.get(key) is not None:
            kv[f"{a}.rope.scaling.{name}"] = float(sc[key])
    return kv


def arch_keys(c: dict, name: str, dtype: str, source: dict | None = None) -> dict:
    if c["arch"] not in GGUF_ARCHS:
        raise ToGgufError(f"arch '{c['arch']}' is not supported yet ({', '.join(GGUF_ARCHS)})")
    a = GGUF_ARCHS[c["arch"]]
    window = c.get("sliding_window", 0) or max(c.get("layer_window") or [0])
    if window and not a.startswith("gemma"):
        raise ToGgufError("sliding windows are not supported yet")
    if a == "smollm3":
        rope = c.get("layer_rope") or [True] * c["n_layers"]
        _check(rope == [(i + 1) % 4 != 0 for i in range(c["n_layers"])], f"NoPE layers {rope}")
    yarn = yarn_keys(c, a, source or {})
    base, factor, divisors = (recorded_theta(source), 1.0, None) if yarn else rope_base(c, source)
    if divisors is not None and a != "llama":  # llama.cpp reads rope_freqs on llama only
        raise ToGgufError(f"rope scaling other than linear and yarn is not supported on {a}")
    kv = {
        "general.architecture": a,
        "general.name": name,
        "general.file_type": gguf.FILE_TYPES[dtype],
        f"{a}.context_length": c["max_ctx"],
        f"{a}.embedding_length": c["dim"],
        f"{a}.block_count": c["n_layers"],
        f"{a}.feed_forward_length": c["ffn_dim"],
        f"{a}.attention.head_count": c["n_heads"],
        f"{a}.attention.head_count_kv": c["n_kv_heads"],
        f"{a}.attention.key_length": c["head_dim"],
        f"{a}.attention.value_length": c["head_dim"],
        f"{a}.attention.layer_norm_rms_epsilon": float(c["norm_eps"]),
        f"{a}.rope.freq_base": base,
        f"{a}.rope.dimension_count": int(c.get("rope_dim", c["head_dim"])),
        f"{a}.vocab_size": c["n_vocab"],
    }
    if factor != 1.0:
        kv[f"{a}.rope.scaling.type"] = "linear"
        kv[f"{a}.rope.scaling.factor"] = factor
    kv.update(yarn)
    if a.startswith("gemma"):
        kv.update(gemma_keys(c, a))
    if a in ("qwen35", "qwen35moe"):
        kv.update(qwen35_keys(c, a))
    if "layer_moe" in c:
        kv.update(moe_keys(c, a))
    return kv


def moe_keys(c: dict, a: str) -> dict:
    """The experts' shape. llama.cpp's Qwen MoE graphs make every layer sparse and always
    renormalise the top-k weights."""
    _check(all(c["layer_moe"]), "dense MLP layers in a Mixture-of-Experts model")
    _check(c.get("norm_topk_prob", False), "top-k weights that are not renormalised")
    kv = {
        f"{a}.expert_count": c["n_experts"],
        f"{a}.expert_used_count": c["n_experts_used"],
        f"{a}.expert_feed_forward_length": c["expert_ffn_dim"],
    }
    if c.get("shared_expert_ffn_dim", 0):
        kv[f"{a}.expert_shared_feed_forward_length"] = c["shared_expert_ffn_dim"]
    return kv


def qwen35_keys(c: dict, a: str) -> dict:
    """Qwen3.5's DeltaNet shape (llama.cpp has one head size for keys and values) and which
    layers are DeltaNet layers; the MRoPE sections of a text-only model (all positions equal)."""
    _check(c["lin_k_dim"] == c["lin_v_dim"], "different DeltaNet key and value head sizes")
    n, linear = c["n_layers"], c.get("layer_linear") or [False] * c["n_layers"]
    kv = {
        f"{a}.ssm.conv_kernel": c["lin_conv"],
        f"{a}.ssm.state_size": c["lin_k_dim"],
        f"{a}.ssm.group_count": c["lin_k_heads"],
        f"{a}.ssm.time_step_rank": c["lin_v_heads"],
        f"{a}.ssm.inner_size": c["lin_v_dim"] * c["lin_v_heads"],
    }
    every = next((e for e in range(1, n + 1) if linear == [(i + 1) % e != 0 for i in range(n)]), 0)
    if every:
        kv[f"{a}.full_attention_interval"] = every
    else:
        kv[f"{a}.attention.recurrent_layers"] = gguf.Value(gguf.ARRAY, linear, gguf.BOOL)
    half = int(c.get("rope_dim", c["head_dim"])) // 2
    sections = [half - 2 * (half // 3), half // 3, half // 3, 0]
    kv[f"{a}.rope.dimension_sections"] = gguf.Value(gguf.ARRAY, sections, gguf.I32)
    return kv


def main_dtype(r: mlb.MlbReader) -> str:
    """The type most matrix bytes have (general.file_type)."""
    sizes: dict[str, int] = {}
    for t in r.meta["tensors"]:
        if len(t["shape"]) >= 2 and t["dtype"] != "bytes":
            sizes[t["dtype"]] = sizes.get(t["dtype"], 0) + t["size"]
    return max(sizes, key=lambda k: sizes[k])


def convert_vocab(src: str, out: str) -> None:
    """A vocabulary-only GGUF (no tensors, as llama.cpp's ggml-vocab-*.gguf) of a tokenizer
    folder (tokenizer.json, tokenizer_config.json) or a .mlt file."""
    if os.path.isdir(src):
        files = ctok.read_tokenizer_files(src)
        tj, tc = json.loads(files["tokenizer.json"]), json.loads(files["tokenizer_config.json"])
    else:
        r = mlb.MlbReader(src)
        tj = json.loads(r.raw("tokenizer.json"))
        tc = json.loads(r.raw("tokenizer_config.json"))
    write_vocab(tj, tc, out, os.path.basename(os.path.normpath(src)))


def write_vocab(tj: dict, tc: dict, out: str, name: str) -> None:
    """A vocabulary-only GGUF of a parsed tokenizer.json and tokenizer_config.json."""
    kv = {"general.name": name}
    kv.update(vocab_keys(tj, tc))
    gguf.write(out, kv, [])


SIX_BIT = ("tok_embd", "output", "attn_v", "ffn_down")  # --quant q4_k_m's Q6_K matrices


def requant_array(x: np.ndarray, to: str, leaf: str, rt: bool) -> tuple[str, bytes, bytes | None]:
    """A matrix (rows of a multiple of 32) as --quant `to` writes it: (dtype, bytes, and with
    rt the F32 values those bytes decode to, for --round-trip)."""
    k = x.shape[1] % quant.QK_K == 0
    if to == "q4_k_m" and leaf in SIX_BIT:
        kind = "q6_k" if k else "q8_0"
    elif to in ("q3_k", "iq4_xs"):  # K-quant rows of 256; otherwise as llama-quantize falls back
        kind = to if k else {"q3_k": "q4_1", "iq4_xs": "iq4_nl"}[to]
    elif to == "iq4_nl":
        kind = to
    else:
        kind = "q4_k" if to in ("q4_k", "q4_k_m") and k else "q4_1"
    q = quant.quantize(x, kind)
    return kind, q, quant.dequantize(q, kind, x.shape).tobytes() if rt else None


def requant(
    r: mlb.MlbReader, c: dict, name: str, to: str | None, qwen35: bool, rt: bool
) -> list[tuple]:
    """Tensor `name` of r as written under --quant `to`: [(dtype, shape, bytes) as quantized,
    and as its round trip], both in the .mlb's layout; the tensor as it is when it is no
    matrix of 32-value rows. Qwen3.5's matrices are put in llama.cpp's layout as F32 first (its
    value heads tiled, so ssm_out's columns move whole heads whatever the block size), then
    quantized: theirs come back as gguf.Tensor in that layout (None: skipped). rt: the round
    trip is wanted (else its place holds None for a requantized matrix)."""
    t = r.tensors[name]
    shape, dtype, leaf = tuple(t["shape"]), t["dtype"], name.rsplit(".", 1)[-1]
    if qwen35 and to:
        f32 = r.array(name).astype(np.float32).tobytes()
        got = qwen35_tensor(r, c, name, "f32", shape, f32, f32=True)
        if got is None or not matrices(got.shape, name):
            return [got, got]
        x = np.frombuffer(got.data, "<f4").reshape(-1, got.shape[-1])
        kind, q, back = requant_array(x, to, leaf, rt)
        return [
            gguf.Tensor(got.name, kind, got.shape, q),
            gguf.Tensor(got.name, "f32", got.shape, back) if rt else None,
        ]
    if not to or not matrices(shape, name):
        return [(dtype, shape, r.raw(name))] * 2
    kind, q, back = requant_array(r.array(name).reshape(-1, shape[-1]), to, leaf, rt)
    return [(kind, shape, q), ("f32", shape, back) if rt else None]


def matrices(shape: tuple, name: str) -> bool:
    """Whether a tensor is requantized: matrices of 32-value rows (a 3-D expert tensor as its
    2-D matrices), but the routers, which llama-quantize keeps in F32."""
    router = name.endswith(("ffn_gate_inp", "ffn_gate_inp_shexp"))
    return len(shape) in (2, 3) and shape[-1] % quant.QK == 0 and not router


def fuse_gate_up(ts: list[gguf.Tensor]) -> list[gguf.Tensor]:
    """Each layer's ffn_gate_exps and ffn_up_exps as one ffn_gate_up_exps [E, 2I, H], an
    expert's gate rows then its up rows, where the up tensor was (what llama.cpp's
    convert_hf_to_gguf.py --fuse-gate-up-exps writes)."""
    by_name = {t.name: t for t in ts}
    out = []
    for t in ts:
        if t.name.endswith(".ffn_gate_exps.weight"):
            continue
        if t.name.endswith(".ffn_up_exps.weight"):
            g = by_name[t.name.replace(".ffn_up_exps.", ".ffn_gate_exps.")]
            _check(g.dtype == t.dtype, f"{t.name}: gate and up experts of one type to fuse")
            e, i, h = t.shape
            parts = [np.frombuffer(x.data, np.uint8).reshape(e, -1) for x in (g, t)]
            raw = np.concatenate(parts, axis=1).tobytes()
            name = t.name.replace(".ffn_up_exps.", ".ffn_gate_up_exps.")
            t = gguf.Tensor(name, t.dtype, (e, 2 * i, h), raw)
        out.append(t)
    return out


def convert(
    src: str,
    out: str,
    to: str | None = None,
    round_trip: bool = False,
    rt_out: str | None = None,
    fuse: bool = False,
) -> None:
    """Writes `out` (with --quant `to`: requantized, or with round_trip its F32 round trip);
    rt_out: the round trip to that file too, from the same quantization; fuse: the experts'
    gate and up tensors fused (fuse_gate_up)."""
    if os.path.isdir(src) or src.endswith(".mlt"):
        return convert_vocab(src, out)
    r = mlb.MlbReader(src)
    c = r.config
    tj = json.loads(r.raw("tokenizer.json"))
    tc = json.loads(r.raw("tokenizer_config.json"))
    name = os.path.splitext(os.path.basename(src))[0]
    # (path, 0: the quantized tensors or 1: their round trip)
    outs = [(out, int(round_trip))] + ([(rt_out, 1)] if rt_out else [])
    kvs = []
    for _, rt in outs:
        kv = arch_keys(c, name, to if to and not rt else main_dtype(r), r.meta.get("source"))
        kv.update(vocab_keys(tj, tc))
        pad_vocab(kv, c["n_vocab"])
        kvs.append(kv)
    arch = kvs[0]["general.architecture"]
    tensors: list[list[gguf.Tensor]] = [[] for _ in outs]
    if (
        kvs[0].get(f"{arch}.rope.scaling.type") != "yarn"
        and (divisors := rope_base(c, r.meta.get("source"))[2]) is not None
    ):
        d = divisors.astype(np.float32)
        for ts in tensors:
            ts.append(gguf.Tensor("rope_freqs.weight", "f32", d.shape, d.tobytes()))
    qwen35 = arch in ("qwen35", "qwen35moe")
    for t in r.meta["tensors"]:
        if t["dtype"] == "bytes":
            continue
        forms = requant(r, c, t["name"], to, qwen35, any(rt for _, rt in outs))
        leaf = t["name"].rsplit(".", 1)[-1]
        for (_, rt), ts in zip(outs, tensors):
            form = forms[rt]
            if qwen35 and to:
                if form:
                    ts.append(form)
                continue
            dtype, shape, raw = form
            if leaf in ("attn_q", "attn_k") and arch in ("llama", "smollm3"):
                heads = c["n_heads"] if leaf == "attn_q" else c["n_kv_heads"]
                raw = interleave_rows(raw, shape[0], heads)
            if qwen35:
                got = qwen35_tensor(r, c, t["name"], t["dtype"], shape, raw)
                if got:
                    ts.append(got)
                continue
            if leaf == "ffn_gate_inp_shexp":  # a vector in llama.cpp's files
                shape = shape[1:]
            ts.append(gguf.Tensor(tensor_name(t["name"]), dtype, shape, raw))
    for (path, _), kv, ts in zip(outs, kvs, tensors):
        gguf.write(path, kv, fuse_gate_up(ts) if fuse else ts)


def tile_heads(a: np.ndarray, first: int, unit: int, nk: int, r: int) -> np.ndarray:
    """llama.cpp's tiled value-head order along axis 0 of a (from byte-or-element `first`,
    heads of `unit`): head g·r + v moves to v·nk + g (conversion/qwen.py _reorder_v_heads)."""
    heads = a[first : first + nk * r * unit].reshape(nk, r, unit, *a.shape[1:])
    tiled = heads.swapaxes(0, 1).reshape(nk * r * unit, *a.shape[1:])
    return np.concatenate([a[:first], tiled, a[first + nk * r * unit :]])


QWEN35_NAMES = {
    "ffn_norm": "post_attention_norm.weight",
    "ssm_qkv": "attn_qkv.weight",
    "ssm_z": "attn_gate.weight",
    "ssm_conv": "ssm_conv1d.weight",
    "ssm_dt_bias": "ssm_dt.bias",
    "ssm_a": "ssm_a",
}


def qwen35_tensor(
    r: mlb.MlbReader, c: dict, name: str, dtype: str, shape: tuple, raw: bytes, f32: bool = False
) -> gguf.Tensor | None:
    """A Qwen3.5 tensor as llama.cpp's converter writes it: the gate rows back inside attn_q
    (per head, query rows then gate rows; attn_gate itself is then skipped), the DeltaNet value
    heads tiled, its own names. f32: raw is the tensor decoded to F32 (attn_gate is read so)."""
    prefix, leaf = name.rsplit(".", 1) if "." in name else ("", name)
    prefix = prefix + "." if prefix else ""
    if leaf == "attn_gate":  # attention layers only (DeltaNet gates are ssm_z)
        return None  # merged into attn_q
    if leaf == "attn_q":
        hd, heads = c["head_dim"], c["n_heads"]
        q = np.frombuffer(raw, np.uint8).reshape(heads, hd, -1)
        g = prefix + "attn_gate"
        g_raw = r.array(g).astype(np.float32).tobytes() if f32 else r.raw(g)
        gate = np.frombuffer(g_raw, np.uint8).reshape(heads, hd, -1)
        merged = np.concatenate([q, gate], axis=1).tobytes()
        return gguf.Tensor(prefix + "attn_q.weight", dtype, (2 * shape[0], shape[1]), merged)
    nk, nv = c["lin_k_heads"], c["lin_v_heads"]
    vd, kd = c["lin_v_dim"], c["lin_k_dim"]
    a = np.frombuffer(raw, np.uint8).reshape(shape[0], -1) if len(shape) == 2 else None
    if nk and nv != nk and leaf in ("ssm_qkv", "ssm_conv", "ssm_z", "ssm_beta", "ssm_alpha"):
        first = 2 * nk * kd if leaf in ("ssm_qkv", "ssm_conv") else 0
        unit = vd if leaf in ("ssm_qkv", "ssm_conv", "ssm_z") else 1
        raw = tile_heads(a, first, unit, nk, nv // nk).tobytes()
    elif nk and nv != nk and leaf in ("ssm_dt_bias", "ssm_a"):
        raw = tile_heads(np.frombuffer(raw, "<f4"), 0, 1, nk, nv // nk).tobytes()
    elif nk and nv != nk and leaf == "ssm_out":
        block, nbytes = (32, quant.BLOCK_BYTES[dtype]) if dtype in quant.BLOCK_BYTES else (1, 0)
        unit = vd // block * (nbytes or {"f32": 4, "f16": 2}[dtype])
        cols = a.reshape(shape[0], nv, unit)  # per row: value heads of `unit` bytes
        raw = tile_heads(cols.swapaxes(0, 1), 0, 1, nk, nv // nk).swapaxes(0, 1).tobytes()
    out = prefix + QWEN35_NAMES[leaf] if leaf in QWEN35_NAMES else tensor_name(name)
    if leaf == "ffn_gate_inp_shexp":  # a vector in llama.cpp's files
        shape = shape[1:]
    return gguf.Tensor(out, dtype, shape, raw)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
    p.add_argument(
        "model", help="the .mlb file (a .mlt file or tokenizer folder: a vocabulary-only GGUF)"
    )
    p.add_argument("-o", "--out", required=True, help="the GGUF file to write")
    p.add_argument(
        "--quant",
        choices=["q4_k", "q4_k_m", "q4_1", "q3_k", "iq4_nl", "iq4_xs"],
        help="requantize the matrices (tests; see above)",
    )
    p.add_argument(
        "--round-trip", action="store_true", help="with --quant: F32 of the decoded values"
    )
    p.add_argument(
        "--round-trip-out",
        metavar="PATH",
        help="with --quant: also write the F32 round trip to PATH (one quantization, two files)",
    )
    p.add_argument(
        "--fuse-gate-up-exps",
        action="store_true",
        help="Mixture of Experts: each layer's gate and up experts as one tensor, as "
        "convert_hf_to_gguf.py --fuse-gate-up-exps writes them",
    )
    a = p.parse_args(argv)
    try:
        if (a.round_trip or a.round_trip_out) and not a.quant:
            raise ToGgufError("--round-trip needs --quant")
        convert(a.model, a.out, a.quant, a.round_trip, a.round_trip_out, a.fuse_gate_up_exps)
    except (ToGgufError, mlb.MlbError, gguf.GgufError, ctok.TokenizerError, OSError, KeyError) as e:
        mlb.die(PROG, f"{a.model}: {e}")
    print(f"{PROG}: wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
