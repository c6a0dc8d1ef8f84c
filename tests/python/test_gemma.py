"""Tests of the Gemma 2 / Gemma 3 paths of the Python tools (tools/convert/families/gemma.py,
tests/reference/ref_gemma.py, gen_gemma.py).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: config normalization (class defaults, soft-caps absent vs null, alternate / pattern /
explicit layer types, local and global rope with linear scaling in both the legacy and the v5
per-layer-type form, the image-text text_config), refusals by field name, ref_forward's Gemma
path against naive loops (soft-caps, sliding windows, local/global rope, q/k norms, both
image-text tensor layouts), that soft-caps, the window and the local rope base change the
logits, and gen_random -> convert (vision tower skipped, 1 + w norms, per-family Q4 rule).
"""
from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import mlb
from convert import quant
from convert import safetensors_io as st
from convert.families import gemma
from convert.families.gemma import GEMMA
from convert.hf_config import ConvertError
import gen_random
import ref_forward
from test_tools import run_main

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

HAVE_TOK = os.path.isfile(os.path.join(REPO, ".models", "tokenizers", "gemma3", "tokenizer.json"))
TOK = {"model": {"vocab": {"<bos>": 2, "<eos>": 1, "<start_of_turn>": 105}}}


def norm(cfg: dict, gen: dict | None = None) -> dict:
    return GEMMA.normalize_config(cfg, gen or {}, TOK, {})


def g2(**kw) -> dict:
    c = {
        "model_type": "gemma2",
        "architectures": ["Gemma2ForCausalLM"],
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_hidden_layers": 4,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 48,
        "vocab_size": 100,
    }
    c.update(kw)
    return c


def g3(**kw) -> dict:
    c = dict(
        g2(), model_type="gemma3_text", architectures=["Gemma3ForCausalLM"], num_hidden_layers=8
    )
    c.update(kw)
    return c


def inv(base: float, hd: int) -> np.ndarray:
    return 1.0 / base ** (np.arange(0, hd, 2) / hd)


# ------------------------------------------------------------------------------ config


class GemmaConfigTest(unittest.TestCase):
    def test_gemma2_defaults_and_caps(self):
        c = norm(g2())
        self.assertEqual((c["arch"], c["attn_softcap"], c["final_softcap"]), ("gemma2", 50.0, 30.0))
        self.assertEqual(c["layer_window"], [4096, 0, 4096, 0])  # even layers slide
        self.assertEqual(
            (c["sliding_window"], c["qk_norm"], c["post_norms"], c["activation"]),
            (0, False, True, "gelu_tanh"),
        )
        self.assertEqual(c["embd_scale"], float(np.float32(8.0)))
        self.assertAlmostEqual(c["attn_scale"], 256**-0.5)  # query_pre_attn_scalar default
        self.assertNotIn("rope_freqs_local", c)
        np.testing.assert_allclose(c["rope_freqs"], inv(10000.0, 48))
        self.assertTrue(c["tie_embeddings"])
        self.assertEqual(c["chat_template"], "gemma")
        c = norm(
            g2(
                attn_logit_softcapping=None,
                final_logit_softcapping=None,
                query_pre_attn_scalar=144,
                sliding_window=8,
                layer_types=["full_attention", "sliding_attention"] * 2,
            )
        )
        self.assertEqual((c["attn_softcap"], c["final_softcap"]), (0.0, 0.0))
        self.assertEqual(c["layer_window"], [0, 8, 0, 8])
        self.assertAlmostEqual(c["attn_scale"], 1 / 12)
        self.assertEqual(
            norm(g2(hidden_size=2304))["embd_scale"], float(np.float32(math.sqrt(2304)))
        )

    def test_gemma3_pattern_and_rope(self):
        c = norm(g3())
        self.assertEqual(c["layer_window"], [4096] * 5 + [0] + [4096] * 2)  # pattern 6
        self.assertEqual(c["layer_rope_local"], [True] * 5 + [False, True, True])
        np.testing.assert_allclose(c["rope_freqs"], inv(1e6, 48))
        np.testing.assert_allclose(c["rope_freqs_local"], inv(1e4, 48))
        self.assertEqual((c["qk_norm"], c["attn_softcap"], c["final_softcap"]), (True, 0.0, 0.0))
        c = norm(
            g3(
                sliding_window_pattern=2,
                rope_scaling={"rope_type": "linear", "factor": 8.0},
                rope_local_base_freq=5000.0,
                rope_theta=20000.0,
                final_logit_softcapping=30.0,
            )
        )
        self.assertEqual(c["layer_window"], [4096, 0] * 4)
        np.testing.assert_allclose(c["rope_freqs"], inv(20000.0, 48) / 8)
        np.testing.assert_allclose(c["rope_freqs_local"], inv(5000.0, 48))  # local: unscaled
        self.assertEqual(c["final_softcap"], 30.0)  # Gemma3ForCausalLM applies it
        v5 = norm(
            g3(
                sliding_window_pattern=2,
                final_logit_softcapping=30.0,
                rope_parameters={
                    "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 20000.0},
                    "sliding_attention": {"rope_type": "default", "rope_theta": 5000.0},
                },
            )
        )
        self.assertEqual(v5, c)

    def test_image_text_config(self):
        cfg = {
            "model_type": "gemma3",
            "architectures": ["Gemma3ForConditionalGeneration"],
            "eos_token_id": [1, 106],
            "text_config": {
                "hidden_size": 2560,
                "intermediate_size": 10240,
                "model_type": "gemma3_text",
                "num_hidden_layers": 34,
                "sliding_window": 1024,
                "rope_scaling": {"factor": 8.0, "rope_type": "linear"},
            },
            "vision_config": {"hidden_size": 1152},
        }
        c = norm(cfg)
        self.assertEqual(
            (c["n_heads"], c["n_kv_heads"], c["head_dim"], c["n_vocab"], c["max_ctx"]),
            (8, 4, 256, 262208, 131072),
        )
        self.assertEqual(c["eos_ids"], [1, 106])
        self.assertEqual(c["bos_id"], 2)
        self.assertEqual(c["layer_window"].count(0), 5)  # layers 5, 11, 17, 23, 29
        np.testing.assert_allclose(c["rope_freqs"], inv(1e6, 256) / 8)
        self.assertEqual(GEMMA.default_q4_rule(cfg), "round")
        self.assertEqual(GEMMA.default_q4_rule(g2()), "fit")

    def test_refusals_name_the_field(self):
        vl = {
            "model_type": "gemma3",
            "architectures": ["Gemma3ForConditionalGeneration"],
            "text_config": {"final_logit_softcapping": 30.0},
        }
        for cfg, word in [
            (g2(hidden_activation="gelu"), "hidden_activation"),
            (g2(attention_bias=True), "attention_bias"),
            (g3(use_bidirectional_attention=True), "use_bidirectional_attention"),
            (g3(attn_logit_softcapping=50.0), "attn_logit_softcapping"),
            (vl, "text_config.final_logit_softcapping"),
            (g2(architectures=["Gemma2ForSequenceClassification"]), "architectures"),
            (g3(layer_types=["chunked_attention"] * 8), "layer_types[0]"),
            (g3(layer_types=["full_attention"] * 3), "layer_types"),
            (g2(sliding_window=None), "sliding_window"),
            (g2(partial_rotary_factor=0.5), "partial_rotary_factor"),
            (g3(rope_scaling={"rope_type": "longrope", "factor": 2.0}), "longrope"),
            (dict(vl, text_config={"model_type": "gemma2"}), "text_config.model_type"),
        ]:
            with self.assertRaises(ConvertError) as e:
                norm(cfg)
            self.assertIn(word, str(e.exception))


# ------------------------------------------------------------------------------ reference forward


def naive_forward(cfg: dict, W: dict, tokens: list[int], base: str) -> np.ndarray:
    """Token-by-token, head-by-head float64 loops from the transformers equations."""
    mt = cfg["model_type"]
    t = cfg.get("text_config", cfg)
    d, nh, nkv, hd = (
        t["hidden_size"],
        t["num_attention_heads"],
        t["num_key_value_heads"],
        t["head_dim"],
    )
    eps, n = t["rms_norm_eps"], t["num_hidden_layers"]
    slide = [lt == "sliding_attention" for lt in t["layer_types"]]
    w = {k: v.astype(np.float64) for k, v in W.items()}
    one_plus = {
        k: (np.float32(1) + v).astype(np.float64) for k, v in W.items() if v.ndim == 1
    }  # float32, as HF

    def gn(x, name):
        return x / math.sqrt(sum(v * v for v in x) / len(x) + eps) * one_plus[name]

    def rot(vec, pos, theta, factor):
        out = vec.copy()
        for i in range(hd // 2):
            a = pos * (1.0 / theta ** (2 * i / hd)) / factor
            x0, x1 = vec[i], vec[i + hd // 2]
            out[i], out[i + hd // 2] = x0 * math.cos(a) - x1 * math.sin(a), x1 * math.cos(
                a
            ) + x0 * math.sin(a)
        return out

    def gelu(x):
        return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3)))

    scale = t["query_pre_attn_scalar"] ** -0.5
    cap = t.get("attn_logit_softcapping") if mt == "gemma2" else None
    hs = [w[base + "embed_tokens.weight"][tok] * float(np.float32(math.sqrt(d))) for tok in tokens]
    for L in range(n):
        p = f"{base}layers.{L}."
        if mt == "gemma2":
            theta, factor = t["rope_theta"], 1.0
        elif slide[L]:
            theta, factor = t["rope_local_base_freq"], 1.0
        else:
            theta, factor = t["rope_theta"], (t.get("rope_scaling") or {}).get("factor", 1.0)
        xs = [gn(h, p + "input_layernorm.weight") for h in hs]
        Q, K, V = [], [], []
        for pos, x in enumerate(xs):
            q = (w[p + "self_attn.q_proj.weight"] @ x).reshape(nh, hd)
            k = (w[p + "self_attn.k_proj.weight"] @ x).reshape(nkv, hd)
            if mt != "gemma2":
                q = np.array([gn(v, p + "self_attn.q_norm.weight") for v in q])
                k = np.array([gn(v, p + "self_attn.k_norm.weight") for v in k])
            Q.append([rot(v, pos, theta, factor) for v in q])
            K.append([rot(v, pos, theta, factor) for v in k])
            V.append((w[p + "self_attn.v_proj.weight"] @ x).reshape(nkv, hd))
        new = []
        for i in range(len(tokens)):
            heads = []
            for hh in range(nh):
                kv = hh // (nh // nkv)
                js = [j for j in range(i + 1) if not slide[L] or i - j < t["sliding_window"]]
                sc = []
                for j in js:
                    s = float(Q[i][hh] @ K[j][kv]) * scale
                    sc.append(cap * math.tanh(s / cap) if cap else s)
                m = max(sc)
                e = [math.exp(s - m) for s in sc]
                heads.append(sum(ej / sum(e) * V[j][kv] for ej, j in zip(e, js)))
            o = w[p + "self_attn.o_proj.weight"] @ np.concatenate(heads)
            h = hs[i] + gn(o, p + "post_attention_layernorm.weight")
            x = gn(h, p + "pre_feedforward_layernorm.weight")
            mlp = w[p + "mlp.down_proj.weight"] @ (
                gelu(w[p + "mlp.gate_proj.weight"] @ x) * (w[p + "mlp.up_proj.weight"] @ x)
            )
            new.append(h + gn(mlp, p + "post_feedforward_layernorm.weight"))
        hs = new
    out = []
    fcap = t.get("final_logit_softcapping") if mt != "gemma3" else None
    for h in hs:
        lg = w[base + "embed_tokens.weight"] @ gn(h, base + "norm.weight")
        out.append(fcap * np.tanh(lg / fcap) if fcap else lg)
    return np.array(out)


def micro(
    d: str, model_type: str, layout: str = "model.", seed: int = 0, **kw
) -> tuple[dict, dict, str]:
    """A 2-layer Gemma checkpoint (head_dim 24 != dim/heads 16, window 3), config + weights."""
    t = {
        "hidden_size": 32,
        "intermediate_size": 48,
        "num_hidden_layers": 2,
        "num_attention_heads": 2,
        "num_key_value_heads": 1,
        "head_dim": 24,
        "vocab_size": 50,
        "rms_norm_eps": 1e-6,
        "query_pre_attn_scalar": 16,
        "sliding_window": 3,
        "max_position_embeddings": 128,
        "layer_types": ["sliding_attention", "full_attention"],
        "rope_theta": 10000.0,
    }
    if model_type == "gemma2":
        t.update(attn_logit_softcapping=2.0, final_logit_softcapping=3.0)
    else:
        t.update(
            rope_theta=1000.0,
            rope_local_base_freq=10.0,
            rope_scaling={"rope_type": "linear", "factor": 4.0},
        )
    t.update(kw)
    if model_type == "gemma3":
        cfg = {
            "model_type": "gemma3",
            "architectures": ["Gemma3ForConditionalGeneration"],
            "text_config": dict(t, model_type="gemma3_text"),
        }
    else:
        cfg = dict(t, model_type=model_type, architectures=[gemma.MODEL_TYPES[model_type]])
    rng = np.random.default_rng(seed)
    W = {
        layout + "embed_tokens.weight": rng.normal(0, 1, (50, 32)),
        layout + "norm.weight": rng.normal(0, 0.3, 32),
    }
    for L in range(2):
        p = f"{layout}layers.{L}."
        for name, shape, s in [
            ("self_attn.q_proj", (48, 32), 0.5),
            ("self_attn.k_proj", (24, 32), 0.5),
            ("self_attn.v_proj", (24, 32), 0.3),
            ("self_attn.o_proj", (32, 48), 0.3),
            ("mlp.gate_proj", (48, 32), 0.3),
            ("mlp.up_proj", (48, 32), 0.3),
            ("mlp.down_proj", (32, 48), 0.3),
        ]:
            W[p + name + ".weight"] = rng.normal(0, s, shape)
        for name in (
            "input_layernorm",
            "post_attention_layernorm",
            "pre_feedforward_layernorm",
            "post_feedforward_layernorm",
        ):
            W[p + name + ".weight"] = rng.normal(0, 0.3, 32)
        if model_type != "gemma2":
            W[p + "self_attn.q_norm.weight"] = rng.normal(0, 0.3, 24)
            W[p + "self_attn.k_norm.weight"] = rng.normal(0, 0.3, 24)
    W = {k: v.astype(np.float32) for k, v in W.items()}
    if model_type == "gemma3":
        W["vision_tower.vision_model.post_layernorm.weight"] = np.ones(8, np.float32)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f)
    st.save_dict(os.path.join(d, "model.safetensors"), W)
    return cfg, W, layout


class RefGemmaTest(unittest.TestCase):
    TOKENS = [3, 17, 4, 9, 33, 2, 41, 7, 12]

    def setUp(self):
        self.tmp = tempfile.mkdtemp()

    def tearDown(self):
        shutil.rmtree(self.tmp)

    def test_matches_naive_loops(self):
        for name, mt, layout in [
            ("g2", "gemma2", "model."),
            ("g3", "gemma3_text", "model."),
            ("vl-hub", "gemma3", "language_model.model."),
            ("vl-v5", "gemma3", "model.language_model."),
        ]:
            with self.subTest(name):
                d = os.path.join(self.tmp, name)
                cfg, W, base = micro(d, mt, layout)
                got = ref_forward.forward(d, self.TOKENS, np.float64)
                want = naive_forward(cfg, W, self.TOKENS, base)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)  # float32 output
                f32 = ref_forward.forward(d, self.TOKENS)
                np.testing.assert_allclose(f32, want, rtol=1e-4, atol=1e-4)

    def test_features_change_the_logits(self):
        def run(name, mt, **kw):
            d = os.path.join(self.tmp, name)
            micro(d, mt, **kw)
            return ref_forward.forward(d, self.TOKENS, np.float64)

        def moved(a, b):
            return float(np.abs(a - b).max())

        g2 = run("g2", "gemma2")
        self.assertGreater(
            moved(g2, run("g2-noattncap", "gemma2", attn_logit_softcapping=None)), 1e-2
        )
        self.assertGreater(
            moved(g2, run("g2-nofinalcap", "gemma2", final_logit_softcapping=None)), 1e-1
        )
        self.assertGreater(moved(g2, run("g2-nowin", "gemma2", sliding_window=100)), 1e-2)
        self.assertEqual(
            moved(g2, run("g2-pattern", "gemma2", layer_types=None)), 0.0
        )  # even layers slide
        g3 = run("g3", "gemma3_text")
        self.assertGreater(
            moved(g3, run("g3-local", "gemma3_text", rope_local_base_freq=1000.0)), 1e-2
        )
        self.assertGreater(moved(g3, run("g3-global", "gemma3_text", rope_scaling=None)), 1e-2)
        self.assertGreater(moved(g3, run("g3-nowin", "gemma3_text", sliding_window=100)), 1e-2)
        self.assertEqual(
            moved(g3, run("g3-pattern", "gemma3_text", layer_types=None, sliding_window_pattern=2)),
            0.0,
        )
        # Gemma3ForConditionalGeneration applies no final soft-cap; Gemma3ForCausalLM does
        self.assertGreater(
            moved(g3, run("g3-cap", "gemma3_text", final_logit_softcapping=3.0)), 1e-1
        )
        vl = run("vl", "gemma3", layout="language_model.model.")
        self.assertEqual(
            moved(
                vl,
                run(
                    "vl-cap", "gemma3", layout="language_model.model.", final_logit_softcapping=3.0
                ),
            ),
            0.0,
        )


# ---------------------------------------------------------------------- gen_random -> convert


@unittest.skipUnless(
    HAVE_TOK, "needs .models/tokenizers/gemma3 (scripts/fetch_tokenizers.sh gemma3)"
)
class GemmaConvertTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp()
        for name, args in {
            "g2": ["--arch", "gemma2"],
            "g3": ["--arch", "gemma3"],
            "vl": ["--arch", "gemma3-vl"],
            "vl5": ["--arch", "gemma3-vl", "--vl-layout", "v5"],
        }.items():
            rc, err = run_main(
                gen_random.main, args + ["--vocab", "512", "--seed", "3", "-o", cls.dir(name)]
            )
            assert rc == 0, err

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp)

    @classmethod
    def dir(cls, name: str) -> str:
        return os.path.join(cls.tmp, name)

    def convert(self, name: str, *extra: str) -> tuple[mlb.MlbReader, str]:
        out = os.path.join(self.tmp, f"{name}{'-'.join(extra)}.mlb")
        rc, err = run_main(cli.main, [self.dir(name), "-o", out, *extra])
        self.assertEqual(rc, 0, err)
        return mlb.MlbReader(out), err

    def test_vision_tower_skipped(self):
        want = None
        for name in ("vl", "vl5"):
            r, err = self.convert(name, "--quant", "f32")
            self.assertIn("skipping the vision tower: 23 tensors", err)
            names = sorted(t["name"] for t in r.meta["tensors"])
            self.assertFalse([n for n in names if "vision" in n or "projector" in n])
            self.assertIn("blk.5.attn_q_norm", names)
            self.assertNotIn("output", names)
            want = want or names
            self.assertEqual(names, want)
            c = r.config
            self.assertEqual(
                (c["arch"], c["n_vocab"], c["layer_window"]),
                ("gemma3", 512, [16, 16, 0, 16, 16, 0]),
            )
            np.testing.assert_allclose(c["rope_freqs"][:2], [1 / 8, 1e6 ** (-2 / 64) / 8])

    def test_norms_are_one_plus_w_and_values(self):
        r, _ = self.convert("g2", "--quant", "f32")
        ck = st.Checkpoint(self.dir("g2"))
        try:
            for mlb_name, hf in [
                ("blk.1.attn_post_norm", "model.layers.1.post_attention_layernorm.weight"),
                ("blk.1.ffn_norm", "model.layers.1.pre_feedforward_layernorm.weight"),
                ("blk.1.ffn_post_norm", "model.layers.1.post_feedforward_layernorm.weight"),
                ("blk.0.attn_norm", "model.layers.0.input_layernorm.weight"),
                ("output_norm", "model.norm.weight"),
            ]:
                np.testing.assert_array_equal(r.array(mlb_name), np.float32(1) + ck.get(hf))
            np.testing.assert_array_equal(
                r.array("blk.0.attn_output"), ck.get("model.layers.0.self_attn.o_proj.weight")
            )
        finally:
            ck.close()
        c = r.config
        self.assertEqual(
            (c["attn_softcap"], c["final_softcap"], c["layer_window"]), (8.0, 12.0, [16, 0, 16, 0])
        )
        self.assertNotIn("attn_q_norm", {t["name"].split(".")[-1] for t in r.meta["tensors"]})

    def test_q4_rule_defaults(self):
        for name, rule in (("g3", "round"), ("g2", "fit")):
            r, _ = self.convert(name, "--quant", "q4_0")
            self.assertEqual(r.meta["source"]["q4_rule"], rule)
            x = st.Checkpoint(self.dir(name)).get("model.layers.0.mlp.up_proj.weight")
            self.assertEqual(r.raw("blk.0.ffn_up"), quant.quantize(x, "q4_0", rule))
        r, _ = self.convert("g3", "--quant", "q4_0", "--q4-rule", "fit")
        self.assertEqual(r.meta["source"]["q4_rule"], "fit")

    def test_extra_tensor_refused(self):
        d = os.path.join(self.tmp, "extra")
        shutil.copytree(self.dir("g3"), d)
        st.save_dict(
            os.path.join(d, "extra.safetensors"),
            {"model.layers.0.mlp.bias": np.zeros(4, np.float32)},
        )
        rc, err = run_main(cli.main, [d, "-o", os.path.join(self.tmp, "x.mlb")])
        self.assertEqual(rc, 2)
        self.assertIn("unexpected tensors: model.layers.0.mlp.bias", err)


if __name__ == "__main__":
    unittest.main()
