"""Unit tests of the Python tools (tools/*.py) themselves.

Run: /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: Q8_0/Q4_0 ggml layouts (known answers, rounding, round trips, 'fit' <= 'round'),
safetensors round trips (f32/f16/bf16, shards), the .mlb writer against docs/format.md read
byte by byte, .mlt files, gen_random configs and logit scale, convert (config keys, tensor
table, dtypes, values, llama2.c path), converter refusals, rope scaling (two independent
implementations), ref_forward against a naive loop implementation, and compare.py.
The Qwen2/Qwen3/SmolLM2/SmolLM3 paths are tested in test_tools_arch.py.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import struct
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tools"))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "tests", "e2e"))  # compare.py

import compare  # noqa: E402
import convert  # noqa: E402
import convert_tokenizer as ctok  # noqa: E402
import gen_common  # noqa: E402
import gen_random  # noqa: E402
import hf_config  # noqa: E402
import mlb  # noqa: E402
import quant  # noqa: E402
import ref_common  # noqa: E402
import ref_forward  # noqa: E402
from llama import LLAMA  # noqa: E402
import safetensors_io as st  # noqa: E402

TOKDIR = os.path.join(REPO, ".models", "tokenizers", "llama2")
HAVE_TOK = os.path.isfile(os.path.join(TOKDIR, "tokenizer.json"))
FORMAT_KEYS = [
    "arch",
    "n_vocab",
    "dim",
    "n_layers",
    "n_heads",
    "n_kv_heads",
    "head_dim",
    "ffn_dim",
    "norm_eps",
    "rope_freqs",
    "rope_attn_factor",
    "max_ctx",
    "sliding_window",
    "tie_embeddings",
    "bos_id",
    "eos_ids",
    "chat_template",
]


def read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def run_main(fn, argv: list[str]) -> tuple[int, str]:
    """Run a tool's main() in-process; (exit code, stderr)."""
    err = io.StringIO()
    code = 0
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        try:
            r = fn(argv)
            code = r or 0
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
    return code, err.getvalue()


# ------------------------------------------------------------------------------ quant


class QuantTest(unittest.TestCase):
    def test_q8_0_known_answer_and_rounding(self):
        x = np.zeros(32, np.float32)
        x[:6] = [127, 0.5, -0.5, 1.5, 2.5, -126.5]  # d = 1: halves round away from zero
        b = quant.quantize_q8_0(x)
        self.assertEqual(len(b), 34)
        self.assertEqual(b[:2], np.float16(1.0).tobytes())
        self.assertEqual(list(np.frombuffer(b[2:8], np.int8)), [127, 1, -1, 2, 3, -127])
        self.assertEqual(b[8:], bytes(26))

    def test_q8_0_zero_block(self):
        b = quant.quantize_q8_0(np.zeros(64, np.float32))
        self.assertEqual(b, bytes(68))

    def test_q4_0_known_answer_layout(self):
        x = np.array([j - 8 for j in range(16)] + [7 - j for j in range(16)], np.float32)
        b = quant.quantize_q4_0(x, "round")  # signed max -8 -> d = 1, nibble = x + 8
        self.assertEqual(len(b), 18)
        self.assertEqual(b[:2], np.float16(1.0).tobytes())
        want = [(j) | ((15 - j) << 4) for j in range(16)]  # low: element j, high: element j+16
        self.assertEqual(list(b[2:]), want)
        np.testing.assert_array_equal(quant.dequantize_q4_0(b, (32,)), x)

    def test_q4_0_positive_max_clamps(self):
        x = np.zeros(32, np.float32)
        x[0], x[1] = 8.0, -8.0  # d = -1: 8 -> nibble 0, -8 -> 16 -> 15
        b = quant.quantize_q4_0(x, "round")
        self.assertEqual(np.frombuffer(b[:2], "<f2")[0], -1.0)
        self.assertEqual(b[2] & 0xF, 0)
        self.assertEqual(b[3] & 0xF, 15)
        self.assertEqual(b[4] & 0xF, 8)

    def test_q4_0_zero_block(self):
        for rule in ("round", "fit"):
            b = quant.quantize_q4_0(np.zeros(32, np.float32), rule)
            # d = 0 / -8 = -0.0 in ggml too (f16 0x8000); every nibble is 8
            self.assertEqual(b, b"\x00\x80" + bytes([0x88] * 16))

    def test_round_trips_and_fit_not_worse(self):
        rng = np.random.default_rng(1)
        x = rng.standard_normal((64, 96), dtype=np.float32) * 0.05
        x[3, :32] = 0.0
        for dt, tol in (("f32", 0), ("f16", 1e-3), ("q8_0", 0.01), ("q4_0", 0.12)):
            y = quant.round_trip(x, dt)
            self.assertEqual(y.shape, x.shape)
            self.assertLessEqual(np.sqrt(((x - y) ** 2).mean()) / 0.05, tol + 1e-9, dt)
        r = quant.round_trip(x, "q4_0", "round").reshape(-1, 32)
        f = quant.round_trip(x, "q4_0", "fit").reshape(-1, 32)
        xb = x.reshape(-1, 32)
        self.assertTrue(np.all(((xb - f) ** 2).sum(1) <= ((xb - r) ** 2).sum(1) + 1e-12))
        self.assertLess(((xb - f) ** 2).sum(), ((xb - r) ** 2).sum())

    def test_q8_error_bound(self):
        x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
        b = np.frombuffer(quant.quantize_q8_0(x), quant.Q8_DTYPE)
        d = b["d"].astype(np.float32)
        err = np.abs(quant.dequantize_q8_0(quant.quantize_q8_0(x), x.shape) - x).reshape(-1, 32)
        self.assertTrue(
            np.all(err <= d[:, None] * 0.5 + np.abs(x).reshape(-1, 32).max(1, keepdims=True) * 1e-3)
        )

    def test_act_round_trip(self):
        """The runtime's 8-bit activations: f32 scale max|x|/127, half to even, 0 stays 0."""
        x = np.zeros((2, 64), np.float32)
        x[0, :32] = np.linspace(-1, 1, 32, dtype=np.float32)
        x[0, 32:] = 127 * np.float32(0.5) / 127  # block max 0.5: d = 0.5/127
        x[0, 33] = np.float32(2.5) * (np.float32(0.5) / np.float32(127))  # a tie: 2.5 -> 2
        y = quant.act_round_trip(x)
        self.assertEqual(y.shape, x.shape)
        self.assertTrue(np.all(y[1] == 0))  # an all-zero block (d = 0)
        self.assertEqual(y[0, 0], -1.0)  # the block max is exact
        self.assertEqual(y[0, 31], 1.0)
        d = np.float32(0.5) / np.float32(127)
        self.assertAlmostEqual(float(y[0, 33]), float(2 * d), places=9)
        err = np.abs(y[0, :32] - x[0, :32])
        self.assertTrue(np.all(err <= np.float32(1 / 127) * 0.5 * 1.0001))
        self.assertEqual(len(np.unique(y[0, :32])), 32)  # distinct inputs stay distinct here
        with self.assertRaises(ValueError):
            quant.act_round_trip(np.zeros(40, np.float32))

    def test_nbytes_and_bad_cols(self):
        self.assertEqual(quant.nbytes("q8_0", (4, 64)), 4 * 2 * 34)
        self.assertEqual(quant.nbytes("q4_0", (4, 64)), 4 * 2 * 18)
        self.assertEqual(quant.nbytes("bytes", (7,)), 7)
        with self.assertRaises(ValueError):
            quant.quantize_q8_0(np.zeros((2, 40), np.float32))


# ------------------------------------------------------------------------------ safetensors


class SafetensorsTest(unittest.TestCase):
    def test_round_trip_dtypes(self):
        rng = np.random.default_rng(3)
        a = rng.standard_normal((5, 7)).astype(np.float32)
        with tempfile.TemporaryDirectory() as d:
            for dt in ("F32", "F16", "BF16"):
                p = os.path.join(d, f"{dt}.safetensors")
                st.save_dict(p, {"a": a, "b": a[0]}, dt)
                f = st.SafetensorsFile(p)
                self.assertEqual(f.tensors["a"].dtype, dt)
                self.assertEqual(f.tensors["b"].shape, (7,))
                got = f.get("a")
                tol = {"F32": 0, "F16": 1e-3, "BF16": 8e-3}[dt]
                np.testing.assert_allclose(got, a, rtol=tol, atol=0)
                np.testing.assert_array_equal(f.get("a", slice(1, 3)), got[1:3])
                f.close()

    def test_bf16_rounding_and_exactness(self):
        x = np.array([1.0, 1 + 2**-8, 1 + 3 * 2**-8, -2.5, 1e-3], np.float32)
        bits = st.f32_to_bf16(x)
        back = st.bf16_to_f32(bits)
        self.assertEqual(back[0], 1.0)
        self.assertEqual(back[1], 1.0)  # tie -> even
        self.assertEqual(back[2], 1 + 2**-6)  # tie -> even (up)
        self.assertEqual(back[3], -2.5)
        np.testing.assert_array_equal(st.f32_to_bf16(back), bits)

    def test_header_layout(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "m.safetensors")
            st.save_dict(p, {"w": np.arange(6, dtype=np.float32).reshape(2, 3)})
            raw = read_bytes(p)
            n = struct.unpack("<Q", raw[:8])[0]
            h = json.loads(raw[8 : 8 + n])
            self.assertEqual(h["w"], {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 24]})
            self.assertEqual(np.frombuffer(raw[8 + n :], np.float32).tolist(), list(range(6)))

    def test_shards_via_index(self):
        with tempfile.TemporaryDirectory() as d:
            st.save_dict(os.path.join(d, "a-00001.safetensors"), {"x": np.ones(3, np.float32)})
            st.save_dict(
                os.path.join(d, "a-00002.safetensors"), {"y": np.zeros(2, np.float32)}, "BF16"
            )
            with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
                json.dump(
                    {"weight_map": {"x": "a-00001.safetensors", "y": "a-00002.safetensors"}}, f
                )
            ck = st.Checkpoint(d)
            self.assertEqual(sorted(ck.names()), ["x", "y"])
            self.assertEqual(ck.get("y").dtype, np.float32)
            ck.close()

    def test_consolidated_copy_ignored(self):
        with tempfile.TemporaryDirectory() as d:
            st.save_dict(os.path.join(d, "model.safetensors"), {"x": np.ones(3, np.float32)})
            st.save_dict(
                os.path.join(d, "consolidated.safetensors"),
                {"tok_embeddings.weight": np.ones(3, np.float32)},
            )
            ck = st.Checkpoint(d)
            self.assertEqual(ck.names(), ["x"])
            ck.close()


# ------------------------------------------------------------------------------ mlb writer


def parse_mlb_by_spec(path: str) -> tuple[dict, int, bytes]:
    """Read a file following docs/format.md literally (independent of mlb.MlbReader)."""
    raw = read_bytes(path)
    assert raw[:8] == b"KRAFLAMB"
    version, flags, jsize = struct.unpack("<IIQ", raw[8:24])
    assert (version, flags) == (1, 0)
    meta = json.loads(raw[24 : 24 + jsize].decode("utf-8"))
    data_offset = (24 + jsize + 63) // 64 * 64
    return meta, data_offset, raw


class MlbTest(unittest.TestCase):
    def test_writer_matches_spec(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.mlb")
            a = np.arange(64, dtype=np.float32).reshape(2, 32)
            specs = [
                mlb.TensorSpec("b", "bytes", (5,)),
                mlb.TensorSpec("w", "q8_0", (2, 32)),
                mlb.TensorSpec("n", "f32", (3,)),
            ]
            w = mlb.MlbWriter(p, "model", specs, {"arch": "llama"}, {"k": "v"})
            w.add("b", b"hello")
            w.begin("w")
            w.write(quant.quantize_q8_0(a[:1]))
            w.write(quant.quantize_q8_0(a[1:]))
            w.add("n", np.array([1, 2, 3], "<f4").tobytes())
            w.close()
            meta, off, raw = parse_mlb_by_spec(p)
            self.assertEqual(off % 64, 0)
            self.assertEqual(
                raw[24 + len(json.dumps(meta, separators=(",", ":")).encode()) : off].strip(b"\0"),
                b"",
            )
            self.assertEqual((meta["format"], meta["kind"]), ("krafla-mlb", "model"))
            self.assertEqual(
                meta["tokenizer"], {"json": "tokenizer.json", "config": "tokenizer_config.json"}
            )
            t = {x["name"]: x for x in meta["tensors"]}
            self.assertEqual([x["offset"] for x in meta["tensors"]], [0, 64, 192])
            self.assertEqual(t["w"]["size"], 68)
            self.assertEqual(raw[off : off + 5], b"hello")
            self.assertEqual(raw[off + 5 : off + 64], bytes(59))
            self.assertEqual(raw[off + 64 : off + 132], quant.quantize_q8_0(a))
            self.assertEqual(len(raw), off + 192 + 12)
            r = mlb.MlbReader(p)
            np.testing.assert_array_equal(r.array("n"), [1, 2, 3])

    def test_writer_misuse(self):
        with tempfile.TemporaryDirectory() as d:
            w = mlb.MlbWriter(
                os.path.join(d, "t.mlb"),
                "model",
                [mlb.TensorSpec("a", "f32", (2,)), mlb.TensorSpec("b", "f32", (2,))],
                {},
            )
            with self.assertRaises(mlb.MlbError):
                w.begin("b")
            w.begin("a")
            with self.assertRaises(mlb.MlbError):
                w.write(bytes(12))
            w.write(bytes(8))
            with self.assertRaises(mlb.MlbError):
                w.close()
            w.f.close()

    @unittest.skipUnless(HAVE_TOK, "run scripts/fetch_tokenizers.sh")
    def test_mlt(self):
        with tempfile.TemporaryDirectory() as d:
            p = os.path.join(d, "t.mlt")
            self.assertEqual(run_main(ctok.main, [TOKDIR, "-o", p])[0], 0)
            meta, off, raw = parse_mlb_by_spec(p)
            self.assertEqual(meta["kind"], "tokenizer")
            self.assertNotIn("config", meta)
            self.assertEqual(
                [t["name"] for t in meta["tensors"]], ["tokenizer.json", "tokenizer_config.json"]
            )
            for t in meta["tensors"]:
                self.assertEqual(t["dtype"], "bytes")
                want = read_bytes(os.path.join(TOKDIR, t["name"]))
                self.assertEqual(raw[off + t["offset"] : off + t["offset"] + t["size"]], want)
            code, err = run_main(ctok.main, [d, "-o", p])
            self.assertEqual(code, 2)
            self.assertIn("convert_tokenizer.py: error: missing", err)


# ------------------------------------------------------------------------------ rope

ROPE_CASES = [
    {"rope_theta": 10000.0, "max_position_embeddings": 2048},
    {
        "rope_theta": 10000.0,
        "max_position_embeddings": 4096,
        "rope_scaling": {"type": "linear", "factor": 2.0},
    },
    {
        "rope_theta": 500000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "rope_type": "llama3",
            "factor": 32.0,
            "low_freq_factor": 1.0,
            "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192,
        },
    },
    {
        "rope_theta": 10000.0,
        "max_position_embeddings": 32768,
        "rope_scaling": {"rope_type": "yarn", "factor": 4.0},
    },
    {
        "rope_theta": 1000000.0,
        "max_position_embeddings": 131072,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 32768,
            "beta_fast": 32,
            "beta_slow": 1,
        },
    },
    {
        "rope_theta": 10000.0,
        "max_position_embeddings": 65536,
        "rope_scaling": {
            "rope_type": "yarn",
            "original_max_position_embeddings": 8192,
            "attention_factor": 1.2,
        },
    },
    {
        "max_position_embeddings": 4096,
        "rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 20000.0},
    },
]


class RopeTest(unittest.TestCase):
    def test_two_implementations_agree(self):
        for cfg in ROPE_CASES:
            a, fa = hf_config.compute_rope(cfg, 64)
            b, fb = ref_common.inv_frequencies(cfg, 64)
            np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=json.dumps(cfg))
            self.assertAlmostEqual(fa, fb, places=12)

    def test_known_values(self):
        plain, f = hf_config.compute_rope(ROPE_CASES[0], 64)
        self.assertEqual((plain[0], f), (1.0, 1.0))
        self.assertAlmostEqual(plain[1], 10000 ** (-2 / 64))
        lin, _ = hf_config.compute_rope(ROPE_CASES[1], 64)
        np.testing.assert_allclose(lin, np.array(plain) / 2)
        l3, _ = hf_config.compute_rope(ROPE_CASES[2], 64)
        base, _ = hf_config.compute_rope({"rope_theta": 500000.0}, 64)
        self.assertEqual(l3[0], base[0])  # high frequency untouched
        self.assertAlmostEqual(l3[-1], base[-1] / 32)  # low frequency divided by factor
        _, attn = hf_config.compute_rope(ROPE_CASES[3], 64)
        self.assertAlmostEqual(attn, 0.1 * np.log(4.0) + 1.0)
        y, _ = hf_config.compute_rope(ROPE_CASES[4], 64)  # explicit factor 4 wins over 131072/32768
        base, _ = hf_config.compute_rope({"rope_theta": 1000000.0}, 64)
        self.assertAlmostEqual(y[0], base[0])
        self.assertAlmostEqual(y[-1], base[-1] / 4)
        y, attn = hf_config.compute_rope(ROPE_CASES[5], 64)  # no factor: 65536/8192
        self.assertAlmostEqual(y[-1], hf_config.compute_rope({}, 64)[0][-1] / 8)
        self.assertEqual(attn, 1.2)

    def test_unknown_type_refused(self):
        with self.assertRaises(convert.ConvertError):
            hf_config.compute_rope({"rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}, 64)


# ------------------------------------------------------------------------------ ref_forward


def naive_forward(
    cfg: dict,
    W: dict,
    tokens: list[int],
    windows: list[int] | None = None,
    use_rope: list[bool] | None = None,
    inv: np.ndarray | None = None,
    attn_factor: float = 1.0,
) -> np.ndarray:
    """Token-by-token float64 forward of one causal LM with every feature spelled out as loops
    (for a cross-check of ref_forward): q/k/v biases and q/k norms where W has them, a window
    and a RoPE flag per layer (default: config's sliding_window on every layer, RoPE
    everywhere), inverse frequencies (default: rope_theta^(-2i/head_dim)) and attention factor."""
    nh, nkv, hd = cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
    eps, T, half = cfg["rms_norm_eps"], len(tokens), cfg["head_dim"] // 2
    L_all = cfg["num_hidden_layers"]
    windows = windows if windows is not None else [cfg.get("sliding_window") or 0] * L_all
    use_rope = use_rope if use_rope is not None else [True] * L_all
    inv = inv if inv is not None else cfg["rope_theta"] ** (-2.0 * np.arange(half) / hd)
    W = {k: v.astype(np.float64) for k, v in W.items()}

    def rms(x, w):
        return np.array(
            [x[i] / np.sqrt(sum(v * v for v in x) / len(x) + eps) * w[i] for i in range(len(x))]
        )

    def rot(vec, pos):
        out = vec.copy()
        for i in range(half):
            c, s = np.cos(pos * inv[i]) * attn_factor, np.sin(pos * inv[i]) * attn_factor
            out[i], out[i + half] = vec[i] * c - vec[i + half] * s, vec[i + half] * c + vec[i] * s
        return out

    def head(vecs, t, hidx, name, L):
        x = vecs[t][hidx * hd : (hidx + 1) * hd]
        nw = W.get(f"model.layers.{L}.self_attn.{name}_norm.weight")
        if nw is not None:
            x = rms(x, nw)
        return rot(x, t) if use_rope[L] else x

    def lin(name, x):
        y = W[name + ".weight"] @ x
        return y + W[name + ".bias"] if name + ".bias" in W else y

    h = [W["model.embed_tokens.weight"][t].copy() for t in tokens]
    for L in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{L}."
        xs = [rms(h[t], W[p + "input_layernorm.weight"]) for t in range(T)]
        q = [lin(p + "self_attn.q_proj", x) for x in xs]
        k = [lin(p + "self_attn.k_proj", x) for x in xs]
        v = [lin(p + "self_attn.v_proj", x) for x in xs]
        for t in range(T):
            att = np.zeros(nh * hd)
            for hh in range(nh):
                kvh = hh // (nh // nkv)
                qh = head(q, t, hh, "q", L)
                keys = [j for j in range(t + 1) if not windows[L] or t - j < windows[L]]
                s = [qh @ head(k, j, kvh, "k", L) / np.sqrt(hd) for j in keys]
                e = np.exp(np.array(s) - max(s))
                e /= e.sum()
                for wgt, j in zip(e, keys):
                    att[hh * hd : (hh + 1) * hd] += wgt * v[j][kvh * hd : (kvh + 1) * hd]
            h[t] = h[t] + W[p + "self_attn.o_proj.weight"] @ att
        for t in range(T):
            x = rms(h[t], W[p + "post_attention_layernorm.weight"])
            g, u = W[p + "mlp.gate_proj.weight"] @ x, W[p + "mlp.up_proj.weight"] @ x
            h[t] = h[t] + W[p + "mlp.down_proj.weight"] @ (g / (1 + np.exp(-g)) * u)
    out = W.get("lm_head.weight", W["model.embed_tokens.weight"])
    return np.array([out @ rms(h[t], W["model.norm.weight"]) for t in range(T)])


def micro_model(
    d: str,
    model_type: str = "llama",
    tied: bool = False,
    window: int | None = None,
    layers: int = 1,
    vocab: int = 40,
) -> tuple[dict, dict]:
    # fmt: off
    shape = dict(dim=32, n_layers=layers, n_heads=4, n_kv_heads=2, head_dim=16, ffn=64,
                 theta=10000.0, eps=1e-5, max_pos=256, tied=tied, sliding_window=window or 4096)
    # fmt: on
    return write_micro(d, model_type, shape, vocab, 7)


def write_micro(d: str, arch: str, shape: dict, vocab: int, seed: int) -> tuple[dict, dict]:
    """A gen_random checkpoint of a hand-made shape in d: (config, HF name -> array)."""
    cfg = gen_random.make_config(arch, shape, vocab, 1, 2, "f32")
    specs = gen_random.tensor_specs(shape, vocab, arch)
    W = {n: gen_common.full_tensor(seed, n, spec, "f32") for n, spec in specs.items()}
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    st.save_dict(os.path.join(d, "model.safetensors"), W)
    return cfg, W


class RefForwardTest(unittest.TestCase):
    def test_matches_naive_loops(self):
        tokens = [1, 5, 9, 3, 30, 7, 2]
        cases = [("llama", False, None, 1), ("llama", True, None, 2), ("mistral", False, 3, 1)]
        with tempfile.TemporaryDirectory() as d:
            for mt, tied, window, layers in cases:
                sub = os.path.join(d, f"{mt}{tied}{layers}")
                cfg, W = micro_model(sub, mt, tied, window, layers)
                want = naive_forward(cfg, W, tokens)
                got = ref_forward.forward(sub, tokens, np.float64)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=sub)
                got32 = ref_forward.forward(sub, tokens)
                np.testing.assert_allclose(got32, want, rtol=1e-3, atol=1e-3)

    def test_sliding_window_semantics(self):
        m = ref_common.causal_mask(5, 2)
        self.assertEqual(m[4].tolist(), [False, False, False, True, True])  # 4-2 >= 2 masked
        with tempfile.TemporaryDirectory() as d:
            micro_model(os.path.join(d, "a"), "mistral", window=3)
            micro_model(os.path.join(d, "b"), "mistral", window=100)
            micro_model(os.path.join(d, "c"), "llama")
            toks = [3, 4, 5, 6, 7, 8]
            a, b, c = (ref_forward.forward(os.path.join(d, x), toks, np.float64) for x in "abc")
            np.testing.assert_allclose(b, c, atol=1e-12)  # window >= T: plain causal
            np.testing.assert_allclose(a[:3], c[:3], atol=1e-12)  # first 3 positions unaffected
            self.assertGreater(np.abs(a[3:] - c[3:]).max(), 1e-6)

    def test_quantized_weights_option(self):
        with tempfile.TemporaryDirectory() as d:
            micro_model(d)
            code, _ = run_main(
                ref_forward.main,
                [
                    d,
                    "--tokens",
                    "1,2,3",
                    "--out",
                    os.path.join(d, "l.npy"),
                    "--quantized-weights",
                    "q8_0",
                ],
            )
            self.assertEqual(code, 0)
            q = np.load(os.path.join(d, "l.npy"))
            f = ref_forward.forward(d, [1, 2, 3])
            self.assertEqual(q.shape, (3, 40))
            self.assertGreater(np.abs(q - f).max(), 0)
            self.assertLess(np.abs(q - f).max(), 0.2)


# ------------------------------------------------------------------------------ compare.py


class CompareTest(unittest.TestCase):
    def test_exit_codes(self):
        rng = np.random.default_rng(5)
        ref = rng.standard_normal((4, 50)).astype(np.float32) * 3
        with tempfile.TemporaryDirectory() as d:

            def save(name, a):
                np.save(os.path.join(d, name), a)
                return os.path.join(d, name)

            r = save("r.npy", ref)
            self.assertEqual(
                run_main(
                    compare.main, [r, r, "--max-abs", "0", "--mean-kl", "0", "--min-top1", "1"]
                )[0],
                0,
            )
            t = save("t.npy", ref + rng.standard_normal(ref.shape).astype(np.float32))
            self.assertEqual(run_main(compare.main, [r, t, "--max-kl", "1e-4"])[0], 1)
            self.assertEqual(run_main(compare.main, [r, t])[0], 0)
            self.assertEqual(run_main(compare.main, [r, save("s.npy", ref[:3])])[0], 1)
            bad = ref.copy()
            bad[0, 0] = np.nan
            self.assertEqual(run_main(compare.main, [r, save("n.npy", bad)])[0], 1)
            m = compare.metrics(ref, ref + 1.0)  # a constant shift leaves softmax unchanged
            self.assertAlmostEqual(m["max_kl"], 0.0, places=10)
            self.assertEqual(m["top1"], 1.0)


# ---------------------------------------------------------------------- gen_random + convert


@unittest.skipUnless(HAVE_TOK, "run scripts/fetch_tokenizers.sh")
class ConvertTest(unittest.TestCase):
    tmp: tempfile.TemporaryDirectory
    tiny: str
    mistral: str

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.tiny = os.path.join(cls.tmp.name, "tiny")
        cls.l2c = os.path.join(cls.tmp.name, "tiny.bin")
        cls.mistral = os.path.join(cls.tmp.name, "mistral")
        assert (
            run_main(
                gen_random.main,
                [
                    "--arch",
                    "llama",
                    "--shape",
                    "tiny",
                    "--seed",
                    "3",
                    "-o",
                    cls.tiny,
                    "--llama2c-out",
                    cls.l2c,
                ],
            )[0]
            == 0
        )
        assert (
            run_main(
                gen_random.main,
                [
                    "--arch",
                    "mistral",
                    "--shape",
                    "mistral-tiny",
                    "--dtype",
                    "bf16",
                    "-o",
                    cls.mistral,
                ],
            )[0]
            == 0
        )

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def out(self, name: str) -> str:
        return os.path.join(self.tmp.name, name)

    def convert(self, argv: list[str]) -> tuple[int, str]:
        return run_main(convert.main, argv)

    def copy_model(self, name: str, src: str | None = None) -> str:
        d = self.out(name)
        shutil.copytree(src or self.tiny, d)
        return d

    def edit_config(self, d: str, **changes) -> None:
        p = os.path.join(d, "config.json")
        with open(p) as f:
            cfg = json.load(f)
        cfg.update(changes)
        with open(p, "w") as f:
            json.dump(cfg, f)

    def test_gen_random_config_and_logit_scale(self):
        with open(os.path.join(self.tiny, "config.json")) as f:
            cfg = json.load(f)
        self.assertEqual((cfg["model_type"], cfg["architectures"]), ("llama", ["LlamaForCausalLM"]))
        self.assertEqual(cfg["vocab_size"], 32000)
        self.assertEqual(
            (cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]), (8, 2, 32)
        )
        ck = st.Checkpoint(self.tiny)
        self.assertIn("lm_head.weight", ck.names())
        self.assertEqual(len(ck.names()), 2 + 9 * cfg["num_hidden_layers"] + 1)
        ck.close()
        logits = ref_forward.forward(self.tiny, [1, 450, 4996, 17354])
        self.assertTrue(1.5 < logits.std(axis=1).mean() < 6, logits.std(axis=1))
        with open(os.path.join(self.mistral, "config.json")) as f:
            m = json.load(f)
        self.assertEqual(
            (m["model_type"], m["sliding_window"], m["torch_dtype"]), ("mistral", 16, "bfloat16")
        )
        self.assertEqual(st.Checkpoint(self.mistral).info("model.norm.weight").dtype, "BF16")

    def test_gen_random_missing_tokenizer(self):
        code, err = run_main(
            gen_random.main,
            ["--arch", "llama", "--shape", "tiny", "--tokenizer", "nope", "-o", self.out("nope")],
        )
        self.assertEqual(code, 2)
        self.assertIn("gen_random.py: error: tokenizer 'nope' not found", err)
        self.assertIn("fetch_tokenizers.sh", err)

    def test_gen_random_deterministic_per_tensor(self):
        a = list(gen_common.gen_tensor(1, "x", (3, 64), 0.1, "f32"))
        b = list(gen_common.gen_tensor(1, "x", (3, 64), 0.1, "f32"))
        c = list(gen_common.gen_tensor(1, "y", (3, 64), 0.1, "f32"))
        np.testing.assert_array_equal(a[0], b[0])
        self.assertFalse(np.array_equal(a[0], c[0]))

    def test_convert_q4_table_config_and_values(self):
        p = self.out("tiny_q4.mlb")
        code, err = self.convert(
            [self.tiny, "-o", p, "--quant", "q4_0", "--q8", "embd,output,down"]
        )
        self.assertEqual(code, 0, err)
        meta, off, raw = parse_mlb_by_spec(p)
        c = meta["config"]
        self.assertEqual(sorted(c), sorted(FORMAT_KEYS))
        self.assertEqual(
            (c["arch"], c["n_vocab"], c["dim"], c["n_layers"], c["head_dim"], c["ffn_dim"]),
            ("llama", 32000, 256, 2, 32, 352),
        )
        self.assertEqual(
            (c["bos_id"], c["eos_ids"], c["chat_template"], c["sliding_window"]),
            (1, [2], "llama2", 0),
        )
        self.assertEqual(len(c["rope_freqs"]), 16)
        t = {x["name"]: x for x in meta["tensors"]}
        dt = {n: x["dtype"] for n, x in t.items()}
        self.assertEqual(
            (
                dt["tok_embd"],
                dt["output"],
                dt["blk.0.ffn_down"],
                dt["blk.1.attn_q"],
                dt["blk.0.attn_norm"],
                dt["tokenizer.json"],
            ),
            ("q8_0", "q8_0", "q8_0", "q4_0", "f32", "bytes"),
        )
        self.assertEqual(t["blk.0.attn_k"]["shape"], [64, 256])
        self.assertEqual(t["blk.0.attn_output"]["shape"], [256, 256])
        for x in meta["tensors"]:
            self.assertEqual(x["offset"] % 64, 0)
            self.assertEqual(x["size"], quant.nbytes(x["dtype"], tuple(x["shape"])))
            self.assertLessEqual(off + x["offset"] + x["size"], len(raw))
        ck = st.Checkpoint(self.tiny)
        w = ck.get("model.layers.1.self_attn.q_proj.weight")
        got = raw[off + t["blk.1.attn_q"]["offset"] :][: t["blk.1.attn_q"]["size"]]
        self.assertEqual(got, quant.quantize_q4_0(w, "fit"))
        r = mlb.MlbReader(p)
        np.testing.assert_array_equal(r.array("output_norm"), ck.get("model.norm.weight"))
        self.assertEqual(
            r.raw("tokenizer.json"), read_bytes(os.path.join(self.tiny, "tokenizer.json"))
        )
        ck.close()

    def test_convert_says_which_chat_template_it_recorded(self):
        # The tiny model has the Llama 2 vocabulary and no template: llama2 from the vocabulary.
        code, err = self.convert([self.tiny, "-o", self.out("tiny_ct.mlb"), "--quant", "f32"])
        self.assertEqual(code, 0, err)
        self.assertIn("convert: chat template: 'llama2' recorded (guessed from the vocabulary", err)
        self.assertEqual(mlb.MlbReader(self.out("tiny_ct.mlb")).config["chat_template"], "llama2")
        # A template no renderer reproduces (ChatML with Qwen2's built-in system prompt): nothing
        # recorded, and the line says so.
        d = self.copy_model("tiny_odd_template")
        p = os.path.join(d, "tokenizer_config.json")
        with open(p) as f:
            tc = json.load(f)
        tc["chat_template"] = (
            "{% if messages[0]['role'] != 'system' %}<|im_start|>system\\nYou are a "
            "helpful assistant.<|im_end|>\\n{% endif %}"
        )
        with open(p, "w") as f:
            json.dump(tc, f)
        code, err = self.convert([d, "-o", self.out("tiny_odd.mlb"), "--quant", "f32"])
        self.assertEqual(code, 0, err)
        self.assertIn(
            "convert: chat template: none recorded (the checkpoint's chat template matches "
            "no built-in renderer); pick one with ml_run --chat NAME",
            err,
        )
        self.assertEqual(mlb.MlbReader(self.out("tiny_odd.mlb")).config["chat_template"], "")
        # The note alone: a template that is recognised, and no template with no hint at all.
        self.assertIn(
            "'chatml' recorded (guessed from the checkpoint's chat template and vocabulary)",
            convert.chat_template_note(
                {"chat_template": "chatml"}, {"tokenizer_config.json": b'{"chat_template": "x"}'}
            ),
        )
        self.assertIn(
            "none recorded (the checkpoint has no chat template and the vocabulary",
            convert.chat_template_note({"chat_template": ""}, {"tokenizer_config.json": b"{}"}),
        )

    def test_convert_f16_mistral_bf16_input(self):
        p = self.out("mistral_f16.mlb")
        code, err = self.convert([self.mistral, "-o", p, "--quant", "f16"])
        self.assertEqual(code, 0, err)
        r = mlb.MlbReader(p)
        self.assertEqual((r.config["arch"], r.config["sliding_window"]), ("mistral", 16))
        ck = st.Checkpoint(self.mistral)
        np.testing.assert_allclose(
            r.array("blk.0.ffn_up"),
            ck.get("model.layers.0.mlp.up_proj.weight"),
            rtol=1e-3,
            atol=1e-7,
        )  # f16 subnormals: absolute error
        self.assertEqual(r.tensors["blk.0.ffn_up"]["dtype"], "f16")
        ck.close()

    def test_llama2c_round_trip_is_exact(self):
        a, b = self.out("hf_f32.mlb"), self.out("l2c_f32.mlb")
        self.assertEqual(self.convert([self.tiny, "-o", a, "--quant", "f32"])[0], 0)
        code, err = self.convert(["llama2c", self.l2c, self.tiny, "-o", b, "--quant", "f32"])
        self.assertEqual(code, 0, err)
        ra, rb = mlb.MlbReader(a), mlb.MlbReader(b)
        self.assertEqual(ra.config, rb.config)
        self.assertEqual(list(ra.tensors), list(rb.tensors))
        for n in ra.tensors:
            self.assertEqual(ra.raw(n), rb.raw(n), n)

    def test_llama2c_interleaved_rope_is_equivalent(self):
        """llama2.c rotates pairs (2i, 2i+1) with freq 10000^(-2i/hd); after the row
        permutation that must give the same rotated q as HF's rotate_half on HF rows."""
        hd, nh, pos = 8, 2, 5
        w = np.random.default_rng(0).standard_normal((nh * hd, 16))
        x = np.random.default_rng(1).standard_normal(16)
        inv = 10000.0 ** (-np.arange(0, hd, 2) / hd)
        q_hf = (w @ x).reshape(nh, hd)
        c, s = np.cos(pos * np.concatenate([inv, inv])), np.sin(pos * np.concatenate([inv, inv]))
        rot_hf = q_hf * c + np.concatenate([-q_hf[:, hd // 2 :], q_hf[:, : hd // 2]], 1) * s
        q_il = (gen_random.hf_to_interleaved(w, nh) @ x).reshape(nh, hd)
        rot_il = q_il.copy()
        for i in range(hd // 2):
            a, b, th = q_il[:, 2 * i], q_il[:, 2 * i + 1], pos * inv[i]
            rot_il[:, 2 * i], rot_il[:, 2 * i + 1] = a * np.cos(th) - b * np.sin(th), a * np.sin(
                th
            ) + b * np.cos(th)
        np.testing.assert_allclose(rot_il[:, 0::2], rot_hf[:, : hd // 2], atol=1e-12)
        np.testing.assert_allclose(rot_il[:, 1::2], rot_hf[:, hd // 2 :], atol=1e-12)
        np.testing.assert_array_equal(
            convert.interleaved_to_hf(gen_random.hf_to_interleaved(w, nh), nh), w
        )
        with open(self.l2c, "rb") as f:
            self.assertEqual(struct.unpack("<7i", f.read(28)), (256, 352, 2, 8, 2, -32000, 2048))

    def assert_refused(self, argv: list[str], *needles: str) -> None:
        code, err = self.convert(argv)
        self.assertEqual(code, 2, err)
        line = err.strip()
        self.assertEqual(len(line.splitlines()), 1, err)
        self.assertTrue(line.startswith("convert.py: error: "), line)
        for n in needles:
            self.assertIn(n, line)
        self.assertFalse(os.path.exists(argv[argv.index("-o") + 1]))

    def test_refusals_config(self):
        cases = [
            ({"model_type": "gpt2"}, "model_type"),
            ({"architectures": ["LlamaForSeq"]}, "architectures"),
            ({"hidden_act": "gelu"}, "hidden_act"),
            ({"attention_bias": True}, "attention_bias"),
            ({"mlp_bias": True}, "mlp_bias"),
            ({"rope_scaling": {"rope_type": "longrope", "factor": 2}}, "rope_type"),
            ({"head_dim": 16}, "q_proj"),
            ({"intermediate_size": 300}, "mlp.gate_proj"),
        ]
        for i, (change, needle) in enumerate(cases):
            d = self.out(f"bad{i}")
            os.makedirs(d)
            for f in ("tokenizer.json", "tokenizer_config.json", "model.safetensors"):
                os.symlink(os.path.join(self.tiny, f), os.path.join(d, f))
            shutil.copy(os.path.join(self.tiny, "config.json"), d)
            self.edit_config(d, **change)
            with self.subTest(change=change):
                self.assert_refused([d, "-o", self.out(f"bad{i}.mlb")], needle)

    def test_refusals_files_and_tensors(self):
        empty = self.out("empty")
        os.makedirs(empty)
        self.assert_refused([empty, "-o", self.out("e.mlb")], "config.json")
        notok = self.out("notok")
        os.makedirs(notok)
        shutil.copy(os.path.join(self.tiny, "config.json"), notok)
        self.assert_refused([notok, "-o", self.out("nt.mlb")], "tokenizer.json")
        ck = st.Checkpoint(self.tiny)
        arrays = {n: ck.get(n) for n in ck.names()}
        ck.close()
        miss = self.copy_model("missing")
        st.save_dict(
            os.path.join(miss, "model.safetensors"),
            {n: a for n, a in arrays.items() if "layers.1.mlp.up_proj" not in n},
        )
        self.assert_refused(
            [miss, "-o", self.out("m.mlb")], "missing tensors", "model.layers.1.mlp.up_proj.weight"
        )
        extra = self.copy_model("extra")
        st.save_dict(
            os.path.join(extra, "more.safetensors"),
            {
                "model.layers.0.self_attn.q_proj.bias": np.zeros(256, np.float32),
                "model.layers.0.self_attn.rotary_emb.inv_freq": np.zeros(16, np.float32),
            },
        )
        self.assert_refused([extra, "-o", self.out("x.mlb")], "unexpected tensors", "q_proj.bias")
        self.assertNotIn("inv_freq", self.convert([extra, "-o", self.out("x.mlb")])[1])

    def test_refusal_cols_not_multiple_of_32(self):
        d = self.out("odd")
        shape = dict(gen_random.SHAPES["tiny"], ffn=40, n_layers=1)
        cfg = gen_random.make_config("llama", shape, 32000, 1, 2, "f32")
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        for f in ctok.TOKENIZER_FILES:
            os.symlink(os.path.join(self.tiny, f), os.path.join(d, f))
        specs = gen_random.tensor_specs(shape, 32000)
        gen_common.write_safetensors(os.path.join(d, "model.safetensors"), specs, 0, "f32")
        self.assert_refused(
            [d, "-o", self.out("odd.mlb"), "--quant", "q8_0"], "mlp.down_proj", "40"
        )
        self.assertEqual(self.convert([d, "-o", self.out("odd32.mlb"), "--quant", "f32"])[0], 0)

    def test_bad_q8_class(self):
        self.assert_refused(
            [self.tiny, "-o", self.out("q.mlb"), "--quant", "q4_0", "--q8", "embd,foo"], "foo"
        )


class TokenizerHelpersTest(unittest.TestCase):
    def test_vocab_size_and_special_ids(self):
        tj = {
            "model": {"vocab": {"a": 0, "b": 1, "<s>": 2}},
            "added_tokens": [{"id": 5, "content": "<x>"}],
        }
        self.assertEqual(ctok.vocab_size(tj), 6)
        self.assertEqual(
            ctok.special_id(tj, {"bos_token": {"content": "<s>"}, "eos_token": "<x>"}, "bos_token"),
            2,
        )
        self.assertEqual(ctok.special_id(tj, {"eos_token": "<x>"}, "eos_token"), 5)
        self.assertEqual(ctok.special_id(tj, {}, "eos_token"), -1)

    def test_chat_template_guess(self):
        spm = {
            "model": {
                "vocab": {
                    **{f"t{i}": i for i in range(31997)},
                    "<s>": 31997,
                    "</s>": 31998,
                    "▁": 31999,
                }
            }
        }
        self.assertEqual(ctok.guess_chat_template(spm, {}), "llama2")
        self.assertEqual(
            ctok.guess_chat_template(spm, {"chat_template": "<|user|>\n{{ m }}"}), "zephyr"
        )
        l3 = {
            "model": {"vocab": {"a": 0}},
            "added_tokens": [{"id": 1, "content": "<|start_header_id|>"}],
        }
        self.assertEqual(ctok.guess_chat_template(l3, {}), "llama3")
        self.assertEqual(
            ctok.guess_chat_template(
                {"model": {"vocab": {"<s>": 0, "</s>": 1, "▁": 2}}},
                {"chat_template": "<start_of_turn>user"},
            ),
            "",
        )
        self.assertEqual(
            ctok.guess_chat_template({"model": {"vocab": {"a": 0}}}, {"chat_template": "[INST]"}),
            "llama2",
        )


@unittest.skipUnless(
    os.path.isfile(os.path.join(REPO, ".models", "tokenizers", "llama3", "tokenizer.json")),
    "run scripts/fetch_tokenizers.sh",
)
class Llama3ShapeTest(unittest.TestCase):
    def test_llama3_1b_config_normalizes(self):
        """The llama3-1b shape (not generated here: 1.2B weights) gives a config that convert
        normalizes with llama3 rope scaling, tied embeddings and the llama3 chat template."""
        tdir = gen_common.resolve_tokenizer("llama3")
        files = ctok.read_tokenizer_files(tdir)
        tj, tc = json.loads(files["tokenizer.json"]), json.loads(files["tokenizer_config.json"])
        s = gen_random.SHAPES["llama3-1b"]
        n = ctok.vocab_size(tj)
        cfg = gen_random.make_config("llama", s, n, 128000, 128001, "bf16")
        self.assertEqual(cfg["rope_scaling"]["rope_type"], "llama3")
        self.assertNotIn("lm_head.weight", gen_random.tensor_specs(s, n))
        c = LLAMA.normalize_config(cfg, {"eos_token_id": [128001, 128009]}, tj, tc)
        self.assertEqual(
            (c["n_vocab"], c["tie_embeddings"], c["chat_template"], c["eos_ids"]),
            (128256, True, "llama3", [128001, 128009]),
        )
        base, _ = hf_config.compute_rope({"rope_theta": 500000.0}, 64)
        self.assertAlmostEqual(c["rope_freqs"][-1], base[-1] / 32)
