"""Tests of the Qwen3.5 paths of the Python tools (tools/convert/families/qwen35.py,
tests/reference/ref_qwen35.py, gen_qwen35.py).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: config normalization of Qwen/Qwen3.5-0.8B's config (layer types, partial RoPE, DeltaNet
shape), class defaults, refusals by field name; the reference's recurrent gated delta rule
against the chunked (UT-transform) form transformers uses for prefill; gen_random -> convert for
both layouts (vision tower and MTP head skipped, q_proj split into attn_q / attn_gate, 1 + w
norms, -exp(A_log), the conv kernel), and that the DeltaNet state and the attention gate change
the logits.
"""
from __future__ import annotations

import copy
import json
import os
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import mlb
from convert import safetensors_io as st
from convert.families.qwen35 import QWEN35
from convert.hf_config import ConvertError
import gen_random
import ref_forward
import ref_qwen35
from test_tools import run_main

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

HAVE_TOK = os.path.isfile(os.path.join(REPO, ".models", "tokenizers", "qwen3", "tokenizer.json"))
TOK = {"model": {"vocab": {"<|endoftext|>": 248044, "<|im_end|>": 248046}}}

# Qwen/Qwen3.5-0.8B's config.json (text part), as published.
Q08 = {
    "architectures": ["Qwen3_5ForConditionalGeneration"],
    "model_type": "qwen3_5",
    "tie_word_embeddings": True,
    "text_config": {
        "model_type": "qwen3_5_text",
        "vocab_size": 248320,
        "hidden_size": 1024,
        "intermediate_size": 3584,
        "num_hidden_layers": 24,
        "num_attention_heads": 8,
        "num_key_value_heads": 2,
        "head_dim": 256,
        "attention_bias": False,
        "attn_output_gate": True,
        "linear_num_key_heads": 16,
        "linear_num_value_heads": 16,
        "linear_key_head_dim": 128,
        "linear_value_head_dim": 128,
        "linear_conv_kernel_dim": 4,
        "rms_norm_eps": 1e-6,
        "full_attention_interval": 4,
        "max_position_embeddings": 262144,
        "tie_word_embeddings": True,
        "eos_token_id": 248044,
        "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 6,
        "rope_parameters": {
            "mrope_interleaved": True,
            "mrope_section": [11, 11, 10],
            "rope_type": "default",
            "rope_theta": 10000000,
            "partial_rotary_factor": 0.25,
        },
    },
    "vision_config": {"depth": 12, "hidden_size": 768},
}


def norm(cfg: dict) -> dict:
    return QWEN35.normalize_config(cfg, {}, TOK, {})


def with_text(**kw) -> dict:
    c = copy.deepcopy(Q08)
    c["text_config"].update(kw)
    return c


class ConfigTest(unittest.TestCase):
    def test_qwen35_08b(self):
        c = norm(Q08)
        self.assertEqual(c["arch"], "qwen3_5")
        self.assertEqual(c["layer_linear"], [True, True, True, False] * 6)
        self.assertEqual((c["rope_dim"], len(c["rope_freqs"])), (64, 32))
        self.assertAlmostEqual(
            c["rope_freqs"][1], 1e7 ** (-2 / 64), places=6
        )  # float32, as transformers
        self.assertEqual(
            (c["lin_k_heads"], c["lin_v_heads"], c["lin_k_dim"], c["lin_v_dim"], c["lin_conv"]),
            (16, 16, 128, 128, 4),
        )
        self.assertTrue(c["tie_embeddings"] and c["qk_norm"] and c["attn_gate"])
        self.assertEqual(c["eos_ids"][0], 248044)

    def test_defaults(self):
        text = {
            k: v
            for k, v in Q08["text_config"].items()
            if k not in ("layer_types", "rope_parameters")
        }
        c = norm({"model_type": "qwen3_5_text", **text})
        self.assertEqual(
            c["layer_linear"], [True, True, True, False] * 6
        )  # full_attention_interval 4
        self.assertEqual(c["rope_dim"], 64)  # partial_rotary_factor 0.25
        c = norm({"model_type": "qwen3_5_text", **dict(text, full_attention_interval=2)})
        self.assertEqual(c["layer_linear"][:4], [True, False, True, False])

    def test_refusals_name_the_field(self):
        cases = [
            (with_text(attention_bias=True), "attention_bias"),
            (with_text(attn_output_gate=False), "attn_output_gate"),
            (with_text(hidden_act="gelu"), "hidden_act"),
            (with_text(num_experts=64), "num_experts"),
            (with_text(rope_parameters={"rope_type": "yarn", "factor": 4}), "rope_type"),
            (
                with_text(rope_parameters={"rope_theta": 1e6, "partial_rotary_factor": 0.2}),
                "partial_rotary_factor",
            ),
            (with_text(layer_types=["linear_attention"] * 23), "layer_types"),
            (with_text(layer_types=["sliding_attention"] * 24), "layer_types[0]"),
            (
                with_text(linear_num_value_heads=24, linear_num_key_heads=16),
                "linear_num_value_heads",
            ),
            (dict(Q08, architectures=["Qwen3_5MoeForConditionalGeneration"]), "architectures"),
            (
                dict(Q08, text_config=dict(Q08["text_config"], model_type="qwen3_5_moe_text")),
                "text_config.model_type",
            ),
        ]
        for cfg, field in cases:
            with self.subTest(field=field), self.assertRaises(ConvertError) as e:
                norm(cfg)
            self.assertIn(field, str(e.exception))


def chunked_gated_delta(q, k, v, g, beta, chunk):
    """The chunked (UT transform) form of the gated delta rule, per head, as transformers'
    torch_chunk_gated_delta_rule computes it for prefill."""
    T, H, dk = k.shape
    dv = v.shape[-1]
    out = np.zeros_like(v)
    for h in range(H):
        S = np.zeros((dk, dv))
        for c0 in range(0, T, chunk):
            sl = slice(c0, min(T, c0 + chunk))
            qc, kc, vc, gc, bc = q[sl, h], k[sl, h], v[sl, h], g[sl, h], beta[sl, h]
            n = len(gc)
            cum = np.cumsum(gc)
            L = np.tril(np.exp(cum[:, None] - cum[None, :]))
            A = np.tril((kc * bc[:, None]) @ kc.T * L, -1)
            inv = np.linalg.inv(np.eye(n) + A)
            u = inv @ (vc * bc[:, None])
            w = inv @ (kc * bc[:, None] * np.exp(cum)[:, None])
            v_new = u - w @ S
            out[sl, h] = (qc * np.exp(cum)[:, None]) @ S + ((qc @ kc.T) * L) @ v_new
            S = S * np.exp(cum[-1]) + (kc * np.exp(cum[-1] - cum)[:, None]).T @ v_new
    return out


class DeltaRuleTest(unittest.TestCase):
    def test_recurrent_equals_chunked(self):
        rng = np.random.default_rng(3)
        T, H, dk, dv = 70, 3, 8, 5
        q, k = rng.standard_normal((T, H, dk)), rng.standard_normal((T, H, dk))
        q /= np.linalg.norm(q, axis=-1, keepdims=True) * np.sqrt(dk)
        k /= np.linalg.norm(k, axis=-1, keepdims=True)
        v = rng.standard_normal((T, H, dv))
        g = -np.abs(rng.standard_normal((T, H))) * 0.3
        beta = 1 / (1 + np.exp(-rng.standard_normal((T, H))))
        rec = ref_qwen35.gated_delta_recurrent(q, k, v, g, beta)
        for chunk in (1, 16, 64):
            np.testing.assert_allclose(
                chunked_gated_delta(q, k, v, g, beta, chunk), rec, rtol=1e-9, atol=1e-9
            )
        # and the state matters: the same last token after a different history differs
        q2 = q.copy()
        v2 = v.copy()
        v2[:40] = rng.standard_normal((40, H, dv))
        self.assertGreater(
            np.abs(ref_qwen35.gated_delta_recurrent(q2, k, v2, g, beta)[41] - rec[41]).max(), 1e-3
        )


@unittest.skipUnless(HAVE_TOK, "run scripts/fetch_tokenizers.sh qwen3 first")
class ConvertTest(unittest.TestCase):
    GEN_ARGS = ["--arch", "qwen3.5", "--seed", "4", "--vocab", "2048", "--tokenizer", "qwen3"]

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.vl = os.path.join(cls.tmp.name, "vl")
        cls.text = os.path.join(cls.tmp.name, "text")
        for out, extra in ((cls.vl, []), (cls.text, ["--text-only"])):
            code, err = run_main(gen_random.main, cls.GEN_ARGS + ["-o", out] + extra)
            assert code == 0, err

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_layouts_convert_to_the_same_tensors(self):
        outs = []
        for d in (self.vl, self.text):
            out = d + ".mlb"
            code, err = run_main(cli.main, [d, "-o", out, "--quant", "f32"])
            self.assertEqual(code, 0, err)
            outs.append(mlb.MlbReader(out))
            if d == self.vl:
                self.assertIn("skipping 6 tensors", err)
        a, b = outs  # (the weights differ: gen_random seeds each tensor by its HF name)
        self.assertEqual(a.config, b.config)
        self.assertEqual(
            [(t["name"], t["dtype"], t["shape"]) for t in a.meta["tensors"]],
            [(t["name"], t["dtype"], t["shape"]) for t in b.meta["tensors"]],
        )

    def test_stored_forms(self):
        out = self.vl + "-forms.mlb"
        self.assertEqual(run_main(cli.main, [self.vl, "-o", out, "--quant", "f32"])[0], 0)
        r, ck = mlb.MlbReader(out), st.Checkpoint(self.vl)
        c = r.config
        f32 = lambda n: np.frombuffer(r.raw(n), dtype=np.float32)  # noqa: E731
        hd, nh = c["head_dim"], c["n_heads"]
        qp = ck.get("model.language_model.layers.1.self_attn.q_proj.weight").reshape(nh, 2, hd, -1)
        np.testing.assert_array_equal(f32("blk.1.attn_q").reshape(nh, hd, -1), qp[:, 0])
        np.testing.assert_array_equal(f32("blk.1.attn_gate").reshape(nh, hd, -1), qp[:, 1])
        a = "model.language_model.layers.0.linear_attn."
        np.testing.assert_array_equal(f32("blk.0.ssm_a"), -np.exp(ck.get(a + "A_log")))
        np.testing.assert_array_equal(f32("blk.0.ssm_norm"), ck.get(a + "norm.weight"))  # not 1 + w
        np.testing.assert_array_equal(
            f32("blk.0.attn_norm"),
            np.float32(1) + ck.get("model.language_model.layers.0.input_layernorm.weight"),
        )
        np.testing.assert_array_equal(
            f32("blk.1.attn_q_norm"),
            np.float32(1) + ck.get("model.language_model.layers.1.self_attn.q_norm.weight"),
        )
        np.testing.assert_array_equal(
            f32("blk.0.ssm_conv").reshape(-1, 4), ck.get(a + "conv1d.weight")[:, 0, :]
        )
        self.assertEqual(c["layer_linear"], [True, False, True, False])
        ck.close()

    def test_missing_and_extra_tensors_are_named(self):
        d = os.path.join(self.tmp.name, "bad")
        run_main(gen_random.main, self.GEN_ARGS + ["--text-only", "-o", d])
        with open(os.path.join(d, "config.json")) as f:
            cfg = json.load(f)
        cfg["full_attention_interval"] = 4  # layer 1 becomes a DeltaNet layer on paper only
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        code, err = run_main(cli.main, [d, "-o", d + ".mlb", "--quant", "f32"])
        self.assertEqual(code, 2)
        self.assertIn("missing tensors: model.layers.1.linear_attn.", err)
        self.assertIn("convert.py: error:", err)
        self.assertFalse(os.path.exists(d + ".mlb"))

    def test_state_and_gate_matter(self):
        toks = list(range(5, 45))
        base = ref_forward.forward(self.vl, toks)
        other = ref_forward.forward(self.vl, [7] * 30 + toks[30:])
        self.assertGreater(np.abs(base[-1] - other[-1]).max(), 0.05)  # history reaches the end


if __name__ == "__main__":
    unittest.main()
