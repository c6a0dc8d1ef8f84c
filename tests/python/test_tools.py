"""Unit tests of the Python tools (tools/convert, tests/reference) themselves, and the helpers
the other tool tests share (run_main, write_micro, naive_forward, parse_mlb_by_spec).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: Q8_0/Q4_0 ggml layouts (known answers, rounding, round trips, 'fit' <= 'round'),
safetensors round trips (f32/f16/bf16, shards), the .mlb writer against docs/format.md read
byte by byte, .mlt files, rope scaling (two independent implementations), ref_forward against
a naive loop implementation, and compare.py. convert.py and gen_random are tested in
test_convert.py; the Qwen2/Qwen3/SmolLM2/SmolLM3 paths in test_tools_arch.py.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import struct
import tempfile
import unittest

import numpy as np

import compare
from convert import hf_config
from convert import mlb
from convert import quant
from convert import safetensors_io as st
from convert import tokenizer as ctok
import gen_common
import gen_llama
import ref_common
import ref_forward

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

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

    def test_q4_0_fit_tiny_blocks_keep_a_scale(self):
        """Blocks of values below ~2e-7: their scale rounds to 0 in f16 ('round' zeroes them);
        'fit' keeps a nonzero f16 scale and a smaller error on every such block."""
        rng = np.random.default_rng(3)
        x = rng.standard_normal((4, 128)).astype(np.float32)
        x[0] *= 5e-8  # every block of row 0 tiny
        x[1, :64] *= 3e-8  # two tiny blocks in a normal row
        x[2, 32:64] = 0.0  # and a zero block stays exactly zero
        fit = np.frombuffer(quant.quantize_q4_0(x, "fit"), quant.Q4_DTYPE)
        rnd = np.frombuffer(quant.quantize_q4_0(x, "round"), quant.Q4_DTYPE)
        amax = np.abs(x).reshape(-1, 32).max(1)
        tiny = (amax < 2.3e-7) & (amax > 0)  # max/8 rounds to 0 in f16
        self.assertEqual(int(tiny.sum()), 6)
        self.assertTrue(np.all(rnd["d"][tiny] == 0))  # llama.cpp's rule loses them
        self.assertTrue(np.all(fit["d"][tiny] != 0))
        xb = x.reshape(-1, 32)
        ef = ((xb - quant.round_trip(x, "q4_0", "fit").reshape(-1, 32)) ** 2).sum(1)
        er = ((xb - quant.round_trip(x, "q4_0", "round").reshape(-1, 32)) ** 2).sum(1)
        self.assertTrue(np.all(ef[tiny] < er[tiny]))
        self.assertTrue(np.all(ef <= er + 1e-20))
        self.assertEqual(fit["d"][9], 0)  # row 2's zero block: scale -0.0, nibbles 8
        self.assertTrue(np.all(fit["q"][9] == 0x88))

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
        with self.assertRaises(hf_config.ConvertError):
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
    cfg = gen_llama.make_config(arch, shape, vocab, 1, 2, "f32")
    specs = gen_llama.tensor_specs(shape, vocab, arch)
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
