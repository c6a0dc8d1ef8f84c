"""Tests of tools/convert/gguf.py (the GGUF container, read byte by byte as ggml's docs/gguf.md
lays it out) and tools/convert/to_gguf.py (a .mlb written with llama.cpp's names, q/k row order
and tokenizer keys). That llama.cpp reads these files and scores them as Krafla does is checked
outside the suite (docs/quantization.md's llama.cpp column: PPL within 0.011% on every row).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_gguf.py'
"""
from __future__ import annotations

import json
import os
import struct
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import gguf
from convert import hf_config
from convert import mlb
from convert import quant
from convert import to_gguf
from test_tools import run_main

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

BROWN = os.path.join(REPO, "models", "brown-llama")


class ContainerTest(unittest.TestCase):
    def test_layout_by_the_spec(self):
        rng = np.random.default_rng(0)
        w = rng.standard_normal((3, 64)).astype(np.float32)
        kv = {
            "general.architecture": "llama",
            "a.u8": gguf.Value(gguf.U8, 200),
            "a.i16": gguf.Value(gguf.I16, -3),
            "a.u64": gguf.Value(gguf.U64, 1 << 40),
            "a.f64": gguf.Value(gguf.F64, 0.1),
            "a.bool": True,
            "a.f32": 1.5,
            "a.ints": [1, -2, 3],
            "a.floats": [0.5, 0.25],
            "a.strs": ["x", "ÿz", ""],
        }
        tensors = [
            gguf.Tensor("w.f32", "f32", (3, 64), w.tobytes()),
            gguf.Tensor("w.q8", "q8_0", (3, 64), quant.quantize_q8_0(w)),
            gguf.Tensor("v.f16", "f16", (5,), np.arange(5, dtype="<f2").tobytes()),
        ]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.gguf")
            gguf.write(path, kv, tensors)
            b = open(path, "rb").read()
        # header: magic, version 3, tensor count, kv count
        self.assertEqual(b[:4], b"GGUF")
        self.assertEqual(struct.unpack_from("<IQQ", b, 4), (3, 3, len(kv)))
        # the first key/value: u64 length, key bytes, u32 type 8 (string), u64 length, bytes
        n = struct.unpack_from("<Q", b, 24)[0]
        self.assertEqual(b[32 : 32 + n], b"general.architecture")
        vt, vn = struct.unpack_from("<IQ", b, 32 + n)
        self.assertEqual((vt, vn), (gguf.STRING, 5))
        self.assertEqual(b[32 + n + 12 : 32 + n + 17], b"llama")

        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "t.gguf")
            gguf.write(path, kv, tensors)
            r = gguf.Reader(path)
        self.assertEqual(r.kv["a.u8"], 200)
        self.assertEqual(r.kv["a.i16"], -3)
        self.assertEqual(r.kv["a.u64"], 1 << 40)
        self.assertEqual(r.kv["a.f64"], 0.1)
        self.assertIs(r.kv["a.bool"], True)
        self.assertEqual(r.kv["a.ints"], [1, -2, 3])
        self.assertEqual(r.types["a.ints"], gguf.ARRAY)
        self.assertEqual(r.kv["a.strs"], ["x", "ÿz", ""])
        # tensor infos: ne is the row-major shape reversed; offsets aligned to 32
        self.assertEqual(r.infos["w.f32"], ("f32", (3, 64), 0))
        self.assertEqual(r.infos["w.q8"][0:2], ("q8_0", (3, 64)))
        self.assertEqual(r.infos["w.q8"][2] % 32, 0)
        self.assertEqual(r.data_offset % 32, 0)
        np.testing.assert_array_equal(r.array("w.f32"), w)
        self.assertEqual(r.raw("w.q8"), tensors[1].data)
        np.testing.assert_array_equal(r.array("v.f16"), np.arange(5, dtype=np.float32))

    def test_size_mismatch_refused(self):
        with tempfile.TemporaryDirectory() as d, self.assertRaises(gguf.GgufError):
            gguf.write(os.path.join(d, "t.gguf"), {}, [gguf.Tensor("x", "f32", (4,), b"\0" * 8)])


class ToGgufTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.mlb_path = os.path.join(cls.tmp.name, "brown-q8.mlb")
        code, err = run_main(cli.main, [BROWN, "-o", cls.mlb_path, "--quant", "q8_0"])
        assert code == 0, err
        cls.gguf_path = os.path.join(cls.tmp.name, "brown-q8.gguf")
        code, err = run_main(to_gguf.main, [cls.mlb_path, "-o", cls.gguf_path])
        assert code == 0, err
        cls.m = mlb.MlbReader(cls.mlb_path)
        cls.g = gguf.Reader(cls.gguf_path)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_keys(self):
        kv, c = self.g.kv, self.m.config
        self.assertEqual(kv["general.architecture"], "llama")
        self.assertEqual(kv["general.file_type"], 7)  # LLAMA_FTYPE_MOSTLY_Q8_0
        self.assertEqual(kv["llama.block_count"], c["n_layers"])
        self.assertEqual(kv["llama.embedding_length"], c["dim"])
        self.assertEqual(kv["llama.attention.head_count_kv"], c["n_kv_heads"])
        cfg = json.load(open(os.path.join(BROWN, "config.json")))
        self.assertAlmostEqual(kv["llama.rope.freq_base"], cfg["rope_theta"], delta=1e-6)
        self.assertAlmostEqual(kv["llama.attention.layer_norm_rms_epsilon"], 1e-5, delta=1e-12)

    def test_tensors_same_blocks_and_llama_rope_order(self):
        c = self.m.config
        names = set(self.g.infos)
        self.assertIn("token_embd.weight", names)
        self.assertNotIn("output.weight", names)  # tied
        self.assertEqual(self.g.raw("blk.1.ffn_down.weight"), self.m.raw("blk.1.ffn_down"))
        self.assertEqual(self.g.infos["blk.1.ffn_down.weight"][:2], ("q8_0", (256, 704)))
        # llama.cpp rotates pairs (2i, 2i+1); the .mlb keeps rotate_half's (i, i + hd/2)
        hd = c["head_dim"]
        for leaf, heads in (("attn_q", c["n_heads"]), ("attn_k", c["n_kv_heads"])):
            src = self.m.array(f"blk.0.{leaf}")
            got = self.g.array(f"blk.0.{leaf}.weight")
            for h in range(heads):
                for i in range(hd // 2):
                    np.testing.assert_array_equal(got[h * hd + 2 * i], src[h * hd + i])
                    np.testing.assert_array_equal(
                        got[h * hd + 2 * i + 1], src[h * hd + hd // 2 + i]
                    )

    def test_tokenizer(self):
        kv = self.g.kv
        tj = json.load(open(os.path.join(BROWN, "tokenizer.json")))
        vocab = tj["model"]["vocab"]
        tokens = kv["tokenizer.ggml.tokens"]
        self.assertEqual(kv["tokenizer.ggml.model"], "llama")
        self.assertEqual(len(tokens), len(vocab))
        self.assertTrue(all(tokens[i] == p for p, i in vocab.items()))
        types, scores = kv["tokenizer.ggml.token_type"], kv["tokenizer.ggml.scores"]
        self.assertEqual(types[0], gguf.TOKEN_UNKNOWN)
        self.assertEqual(types[1:3], [gguf.TOKEN_CONTROL] * 2)
        self.assertEqual(types[3 + 0x41], gguf.TOKEN_BYTE)  # <0x41>
        self.assertEqual(types[vocab["▁the"]], gguf.TOKEN_NORMAL)
        # scores rank pieces as tokenizer.json's merges do (Llama 2's whitespace runs last)
        merges = [m.split(" ") for m in tj["model"]["merges"]]
        rank = [scores[vocab[a + b]] for a, b in merges[:200] + merges[-200:]]
        self.assertEqual(rank, sorted(rank, reverse=True))
        self.assertLess(scores[vocab["▁▁"]], scores[vocab["▁the"]])
        self.assertEqual(
            (kv["tokenizer.ggml.bos_token_id"], kv["tokenizer.ggml.eos_token_id"]), (1, 2)
        )
        self.assertIs(kv["tokenizer.ggml.add_bos_token"], True)

    def test_quant_from_bf16(self):
        """--quant q4_k_m from a BF16 .mlb: each matrix is its BF16 values encoded by numpy
        (Q6_K for the embedding, Q8_0 where a row is not a multiple of 256, else Q4_K)."""
        src = os.path.join(self.tmp.name, "brown-bf16.mlb")
        specs, data = [], {}
        for t in self.m.meta["tensors"]:
            name, dtype, raw = t["name"], t["dtype"], self.m.raw(t["name"])
            if len(t["shape"]) == 2 and dtype == "q8_0":
                bits = self.m.array(name).astype(np.float32).view(np.uint32) >> 16
                dtype, raw = "bf16", bits.astype("<u2").tobytes()
            specs.append(mlb.TensorSpec(name, dtype, tuple(t["shape"])))
            data[name] = raw
        with mlb.MlbWriter(src, "model", specs, self.m.config, self.m.meta["source"]) as w:
            for sp in specs:
                w.add(sp.name, data[sp.name])
        out = os.path.join(self.tmp.name, "brown-q4_k_m.gguf")
        code, err = run_main(to_gguf.main, [src, "-o", out, "--quant", "q4_k_m"])
        self.assertEqual(code, 0, err)
        g, b = gguf.Reader(out), mlb.MlbReader(src)
        for name, want in (
            ("token_embd.weight", "q6_k"),
            ("blk.0.attn_q.weight", "q4_k"),
            ("blk.1.ffn_down.weight", "q8_0"),  # 704 columns
            ("blk.1.ffn_up.weight", "q4_k"),
        ):
            self.assertEqual(g.infos[name][0], want, name)
        np.testing.assert_array_equal(
            g.array("token_embd.weight"), quant.round_trip(b.array("tok_embd"), "q6_k")
        )
        np.testing.assert_array_equal(
            g.array("blk.1.ffn_down.weight"), quant.round_trip(b.array("blk.1.ffn_down"), "q8_0")
        )

    def test_round_trip_out_is_the_round_trip_run(self):
        """--round-trip-out writes, from the same pass, byte for byte what a second run with
        --round-trip writes, and -o stays what --quant alone writes."""
        src = self.mlb_path
        paths = {k: os.path.join(self.tmp.name, f"rt-{k}.gguf") for k in ("q", "rt", "q2", "rt2")}
        runs = (
            [src, "-o", paths["q"], "--quant", "q4_k", "--round-trip-out", paths["rt"]],
            [src, "-o", paths["q2"], "--quant", "q4_k"],
            [src, "-o", paths["rt2"], "--quant", "q4_k", "--round-trip"],
        )
        for args in runs:
            code, err = run_main(to_gguf.main, args)
            self.assertEqual(code, 0, err)
        for a, b in (("q", "q2"), ("rt", "rt2")):
            with open(paths[a], "rb") as f, open(paths[b], "rb") as g:
                self.assertEqual(f.read(), g.read(), a)
        self.assertEqual(gguf.Reader(paths["rt"]).infos["blk.0.attn_q.weight"][0], "f32")
        code, err = run_main(to_gguf.main, [src, "-o", paths["q"], "--round-trip-out", "x"])
        self.assertEqual(code, 2)
        self.assertIn("--round-trip needs --quant", err)

    def test_refusals(self):
        bad = dict(self.m.config, rope_freqs=[1.0, 0.5] + [0.4] * 30)
        lin = dict(self.m.config, rope_freqs=list(np.array(self.m.config["rope_freqs"]) / 4))
        base, factor, divisors = to_gguf.rope_base(lin)
        self.assertAlmostEqual(base, 10000.0, delta=1e-6)
        self.assertAlmostEqual(factor, 4.0, delta=1e-12)
        self.assertIsNone(divisors)
        with self.assertRaisesRegex(to_gguf.ToGgufError, "other than linear needs the rope base"):
            to_gguf.rope_base(bad)
        with self.assertRaisesRegex(to_gguf.ToGgufError, "arch 'mamba'"):
            to_gguf.arch_keys(dict(self.m.config, arch="mamba"), "x", "f32")
        with self.assertRaisesRegex(to_gguf.ToGgufError, "GELU"):  # a Llama called Gemma 2
            to_gguf.arch_keys(dict(self.m.config, arch="gemma2"), "x", "f32")
        code, err = run_main(to_gguf.main, [self.gguf_path, "-o", os.path.join(self.tmp.name, "x")])
        self.assertEqual(code, 2)
        self.assertIn("to_gguf.py: error:", err)

    def test_llama3_rope_divisors(self):
        """Llama 3.1's scaling as llama.cpp's converter writes it (rope_freqs.weight): divisor 1
        where the wavelength is under original_ctx / high_freq_factor, the factor above
        original_ctx / low_freq_factor, 1 / ((1 - s) / factor + s) between, s = (original_ctx /
        wavelength - low) / (high - low); the recorded base."""
        sc = {"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0}
        sc.update(high_freq_factor=4.0, original_max_position_embeddings=8192)
        cfg = {"rope_theta": 500000.0, "rope_scaling": sc, "max_position_embeddings": 131072}
        freqs, _ = hf_config.compute_rope(cfg, 64)
        c = dict(self.m.config, head_dim=64, rope_freqs=freqs)
        c.pop("rope_dim", None)
        base, factor, divisors = to_gguf.rope_base(c, {"rope": {"theta": 500000.0}})
        self.assertEqual((base, factor), (500000.0, 1.0))
        wl = 2 * np.pi * 500000.0 ** (np.arange(0, 64, 2) / 64)
        s = (8192 / wl - 1) / 3
        want = np.where(wl < 2048, 1.0, np.where(wl > 8192, 32.0, 1 / ((1 - s) / 32 + s)))
        self.assertTrue(1 < np.count_nonzero(want == 1) < 31 and np.any((want > 1) & (want < 32)))
        np.testing.assert_allclose(divisors, want, rtol=1e-12)
        with self.assertRaisesRegex(to_gguf.ToGgufError, "needs the rope base"):
            to_gguf.rope_base(c)  # a .mlb without source.rope.theta
        with self.assertRaisesRegex(to_gguf.ToGgufError, "not supported on qwen2"):
            to_gguf.arch_keys(dict(c, arch="qwen2"), "x", "f32", {"rope": {"theta": 500000.0}})


class KQuantTest(unittest.TestCase):
    """tools/convert/quant.py's Q4_1, Q4_K and Q6_K encoders (for to_gguf.py --quant) on values
    their grids hold exactly: the bytes ggml's layouts give (as tests/unit/io/gguf_dequant_test.cpp
    packs them) and the same values back."""

    def test_q4_1_known_answer(self):
        q = [(j * 5) % 16 for j in range(32)]
        q[0], q[1] = 0, 15  # the block's min and max: d = 0.5, m = -1.5 exactly
        x = np.array([0.5 * v - 1.5 for v in q], np.float32)
        b = quant.quantize_q4_1(x)
        self.assertEqual(b[:4], np.float16(0.5).tobytes() + np.float16(-1.5).tobytes())
        self.assertEqual(list(b[4:]), [q[j] | (q[j + 16] << 4) for j in range(16)])
        np.testing.assert_array_equal(quant.dequantize_q4_1(b, (32,)), x)

    def test_q4_k_known_answer(self):
        sc, mn = [1, 63, 17, 40, 33, 5, 62, 48], [0, 2, 63, 31, 16, 47, 9, 60]
        q = np.array([(v * 11 + 3) % 16 for v in range(256)]).reshape(8, 32)
        q[:, 0], q[:, 1] = 0, 15  # each sub-block spans its whole grid
        x = (0.5 * np.array(sc)[:, None] * q - 0.25 * np.array(mn)[:, None]).astype(np.float32)
        b = quant.quantize_q4_k(x.reshape(1, 256))
        self.assertEqual(len(b), 144)
        self.assertEqual(b[:4], np.float16(0.5).tobytes() + np.float16(0.25).tobytes())
        s = bytearray(12)
        for j in range(4):
            s[j] = (sc[j] & 63) | ((sc[j + 4] >> 4) << 6)
            s[j + 4] = (mn[j] & 63) | ((mn[j + 4] >> 4) << 6)
            s[j + 8] = (sc[j + 4] & 15) | ((mn[j + 4] & 15) << 4)
        self.assertEqual(b[4:16], bytes(s))
        qs = bytearray(128)  # sub-blocks 2i, 2i+1: low and high nibbles of bytes 32i..32i+31
        for k in range(8):
            for v in range(32):
                qs[32 * (k // 2) + v] |= int(q[k, v]) << (4 * (k % 2))
        self.assertEqual(b[16:], bytes(qs))
        np.testing.assert_array_equal(quant.dequantize_q4_k(b, (256,)), x.reshape(256))
        self.assertEqual(quant.nbytes("q4_k", (3, 512)), 3 * 2 * 144)

    def test_q6_k_known_answer(self):
        sc = [127, 1, 64, 33, 5, 100, 77, 2, 90, 45, 12, 127, 3, 60, 8, 99]
        q = np.array([(v * 13 + 7) % 63 - 31 for v in range(256)]).reshape(16, 16)
        q[:, 0] = 31  # each 16 values span their scale's grid: d = 0.5, scales exact
        x = (0.5 * np.array(sc)[:, None] * q).astype(np.float32)
        b = quant.quantize_q6_k(x.reshape(1, 256))
        self.assertEqual(len(b), 210)
        ql, qh = bytearray(128), bytearray(64)
        for i, v in enumerate(q.reshape(256) + 32):  # ggml's dequantize_row_q6_K, inverted
            h, g, lane = i // 128, i % 128 // 32, i % 32
            ql[64 * h + 32 * (g % 2) + lane] |= int(v & 15) << (4 * (g // 2))
            qh[32 * h + lane] |= int(v >> 4) << (2 * g)
        self.assertEqual(b[:128], bytes(ql))
        self.assertEqual(b[128:192], bytes(qh))
        self.assertEqual(b[192:208], np.array(sc, np.int8).tobytes())
        self.assertEqual(b[208:], np.float16(0.5).tobytes())
        np.testing.assert_array_equal(quant.dequantize_q6_k(b, (256,)), x.reshape(256))
        self.assertEqual(quant.nbytes("q6_k", (3, 512)), 3 * 2 * 210)


if __name__ == "__main__":
    unittest.main()
