"""Tests of the Gemma 4 paths of the Python tools (tools/convert/families/gemma4.py,
tests/reference/ref_gemma4.py, gen_gemma4.py).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_gemma4.py'
Covers: config normalization (the released models' layer geometry: full layers' head size and
KV heads, k_eq_v, the KV-sharing sources, the double-wide MLP, proportional RoPE's table, the
per_layer_config form, the last layer made full), refusals by field name; the reference's
features each changing the logits (or, for the KV-shared layers' unused tensors, not); and
gen_random -> convert for the three tiny shapes (tensor names and shapes, norms stored as is,
experts split from gate_up_proj, the towers' and shared layers' tensors skipped).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import mlb
from convert import safetensors_io as st
from convert.families.gemma4 import GEMMA4
from convert.hf_config import ConvertError
import gen_random
import ref_forward
from test_tools import run_main

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HAVE_TOK = os.path.isfile(os.path.join(REPO, ".models", "tokenizers", "gemma3", "tokenizer.json"))
TOK = {"model": {"vocab": {"<bos>": 2, "<eos>": 1, "<|turn>": 105, "<turn|>": 106}}}
S, F = "sliding_attention", "full_attention"


def norm(cfg: dict) -> dict:
    return GEMMA4.normalize_config(cfg, {}, TOK, {})


def e2b_like(**kw) -> dict:
    """E2B's text_config, shrunk: 4:1 sliding/full, the last 4 layers KV-shared, PLE."""
    text = {
        "model_type": "gemma4_text",
        "hidden_size": 64,
        "intermediate_size": 96,
        "num_hidden_layers": 10,
        "num_attention_heads": 4,
        "num_key_value_heads": 1,
        "head_dim": 16,
        "global_head_dim": 32,
        "layer_types": [F if (i + 1) % 5 == 0 else S for i in range(10)],
        "num_kv_shared_layers": 4,
        "use_double_wide_mlp": True,
        "hidden_size_per_layer_input": 8,
        "vocab_size": 300,
        "vocab_size_per_layer_input": 300,
        "sliding_window": 16,
        "final_logit_softcapping": 30.0,
        "rope_parameters": {
            F: {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6},
            S: {"rope_type": "default", "rope_theta": 1e4},
        },
    }
    text.update(kw)
    return {
        "model_type": "gemma4",
        "architectures": ["Gemma4ForConditionalGeneration"],
        "text_config": text,
    }


class Gemma4ConfigTest(unittest.TestCase):
    def test_e2b_geometry(self):
        c = norm(e2b_like())
        self.assertEqual(c["arch"], "gemma4")
        self.assertEqual(c["layer_head_dim"], [16, 16, 16, 16, 32, 16, 16, 16, 16, 32])
        self.assertEqual(c["layer_kv_heads"], [1] * 10)
        self.assertEqual(c["layer_window"], [16, 16, 16, 16, 0, 16, 16, 16, 16, 0])
        # layers 6..9 share: sliding ones read layer 5 (the last sliding before 6), full ones 4
        self.assertEqual(c["layer_kv_source"], [-1] * 6 + [5, 5, 5, 4])
        self.assertEqual(c["layer_ffn_dim"], [96] * 6 + [192] * 4)
        self.assertEqual(c["layer_v_from_k"], [False] * 10)
        self.assertEqual((c["per_layer_dim"], c["attn_scale"], c["final_softcap"]), (8, 1.0, 30.0))
        self.assertTrue(c["v_norm"] and c["qk_norm"] and c["post_norms"] and c["layer_scale"])
        self.assertEqual(c["chat_template"], "gemma4")
        self.assertNotIn("layer_moe", c)

    def test_proportional_rope(self):
        c = norm(e2b_like())
        # full layers: 32-dim heads, 16 pairs, the first 0.25 * 32 / 2 = 4 rotate with
        # exponent denominator 32 (the whole head), the other 12 do not move
        want = [1e6 ** (-2 * j / 32) for j in range(4)] + [0.0] * 12
        np.testing.assert_allclose(c["rope_freqs"], want, rtol=1e-6)
        self.assertEqual(c["rope_dim"], 32)
        np.testing.assert_allclose(
            c["rope_freqs_local"], [1e4 ** (-2 * j / 16) for j in range(8)], rtol=1e-6
        )
        self.assertEqual(c["rope_dim_local"], 16)
        self.assertEqual(
            c["layer_rope_local"], [t == S for t in e2b_like()["text_config"]["layer_types"]]
        )

    def test_per_layer_config_form(self):
        """Newer saves fold global_head_dim / num_global_key_value_heads into per_layer_config."""
        old = norm(
            e2b_like(
                attention_k_eq_v=True,
                num_global_key_value_heads=2,
                num_key_value_heads=2,
                num_kv_shared_layers=0,
            )
        )
        plc = {str(i): {"head_dim": 32, "num_key_value_heads": 1} for i in (4, 9)}
        new = norm(
            e2b_like(
                attention_k_eq_v=True,
                per_layer_config=plc,
                num_key_value_heads=2,
                num_kv_shared_layers=0,
                global_head_dim=None,
                num_global_key_value_heads=1,
            )
        )
        self.assertEqual(old["layer_head_dim"], new["layer_head_dim"])
        self.assertEqual(new["layer_kv_heads"], [2, 2, 2, 2, 1, 2, 2, 2, 2, 1])
        self.assertEqual(old["layer_kv_heads"], [2, 2, 2, 2, 2, 2, 2, 2, 2, 2])
        self.assertEqual(
            new["layer_v_from_k"], [t == F for t in e2b_like()["text_config"]["layer_types"]]
        )

    def test_last_layer_made_full(self):
        c = norm(e2b_like(layer_types=[S] * 10, num_kv_shared_layers=0))
        self.assertEqual(c["layer_window"][-1], 0)
        self.assertEqual(c["layer_head_dim"][-1], 32)

    def test_moe(self):
        c = norm(
            e2b_like(
                enable_moe_block=True,
                num_experts=8,
                top_k_experts=2,
                moe_intermediate_size=24,
                hidden_size_per_layer_input=0,
                num_kv_shared_layers=0,
            )
        )
        self.assertEqual(c["layer_moe"], [True] * 10)
        self.assertEqual((c["n_experts"], c["n_experts_used"], c["expert_ffn_dim"]), (8, 2, 24))
        self.assertTrue(c["moe_beside_mlp"] and c["norm_topk_prob"])
        self.assertEqual((c["ffn_dim"], c["shared_expert_ffn_dim"]), (96, 0))
        self.assertNotIn("per_layer_dim", c)

    def test_refusals_name_the_field(self):
        cases = {
            "use_bidirectional_attention": dict(use_bidirectional_attention="all"),
            "hidden_activation": dict(hidden_activation="silu"),
            "rope_type": dict(
                rope_parameters={
                    F: {"rope_type": "yarn", "rope_theta": 1e6},
                    S: {"rope_type": "default", "rope_theta": 1e4},
                }
            ),
            "num_kv_shared_layers": dict(num_kv_shared_layers=9),
            "vocab_size_per_layer_input": dict(vocab_size_per_layer_input=200),
            "top_k_experts": dict(
                enable_moe_block=True, num_experts=4, top_k_experts=5, moe_intermediate_size=8
            ),
            "layer_types": dict(layer_types=[S] * 3),
        }
        for word, kw in cases.items():
            with self.assertRaises(ConvertError, msg=word) as e:
                norm(e2b_like(**kw))
            self.assertIn(word, str(e.exception))


# ------------------------------------------------------------------------------ reference


@unittest.skipUnless(HAVE_TOK, "needs .models/tokenizers/gemma3 (scripts/fetch_tokenizers.sh)")
class Gemma4ReferenceTest(unittest.TestCase):
    """Each feature of ref_gemma4.py changes the logits of a tiny random checkpoint when its
    weights or config change: a forward that ignored it would pass no e2e comparison."""

    TOKENS = [int(x) for x in np.random.default_rng(5).integers(3, 1000, 40)]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp()
        cls.dirs, cls.bases = {}, {}
        for shape in ("gemma4-e-tiny", "gemma4-moe-tiny"):
            d = os.path.join(cls.tmp, shape)
            code, err = run_main(
                gen_random.main,
                ["--arch", "gemma4", "--shape", shape, "--vocab", "1000", "--seed", "4", "-o", d],
            )
            assert code == 0, err
            cls.dirs[shape] = d

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp)

    def edited(self, shape: str, name: str, f) -> np.ndarray:
        """The logits with tensor `name` replaced by f(tensor) (in a copy of the checkpoint)."""
        d = os.path.join(self.tmp, "edit")
        shutil.rmtree(d, ignore_errors=True)
        shutil.copytree(self.dirs[shape], d)
        ck = st.Checkpoint(d)
        tensors = {n: ck.get(n) for n in ck.where}
        ck.close()
        tensors[name] = f(tensors[name]).astype(np.float32)
        header = {n: (t.shape, "F32") for n, t in tensors.items()}
        st.save_file(os.path.join(d, "model.safetensors"), header, iter(tensors.items()), {})
        return ref_forward.forward(d, self.TOKENS)

    def base(self, shape: str) -> np.ndarray:
        if shape not in self.bases:
            self.bases[shape] = ref_forward.forward(self.dirs[shape], self.TOKENS)
        return self.bases[shape]

    def test_shared_layers_ignore_their_kv_tensors(self):
        p = "model.language_model.layers.6.self_attn."
        for part in ("k_proj", "v_proj", "k_norm"):
            got = self.edited("gemma4-e-tiny", p + part + ".weight", lambda x: x * 3 + 1)
            np.testing.assert_array_equal(got, self.base("gemma4-e-tiny"), part)

    def test_features_matter(self):
        L = "model.language_model."
        cases = [
            ("gemma4-e-tiny", L + "layers.2.self_attn.k_proj.weight"),  # shared by 5 and 7
            ("gemma4-e-tiny", L + "embed_tokens_per_layer.weight"),
            ("gemma4-e-tiny", L + "per_layer_model_projection.weight"),
            ("gemma4-e-tiny", L + "layers.3.per_layer_projection.weight"),
            ("gemma4-e-tiny", L + "layers.3.layer_scalar"),
            ("gemma4-moe-tiny", L + "layers.1.self_attn.k_proj.weight"),  # V from K
            ("gemma4-moe-tiny", L + "layers.0.router.per_expert_scale"),
            ("gemma4-moe-tiny", L + "layers.0.router.scale"),
            ("gemma4-moe-tiny", L + "layers.2.experts.gate_up_proj"),
            ("gemma4-moe-tiny", L + "layers.2.post_feedforward_layernorm_2.weight"),
        ]
        for shape, name in cases:
            rng = np.random.default_rng(1)
            got = self.edited(shape, name, lambda x: x * (1 + 0.3 * rng.standard_normal(x.shape)))
            self.assertGreater(np.abs(got - self.base(shape)).max(), 1e-3, name)


# ------------------------------------------------------------------------------ convert


@unittest.skipUnless(HAVE_TOK, "needs .models/tokenizers/gemma3 (scripts/fetch_tokenizers.sh)")
class Gemma4ConvertTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp)

    def convert(self, shape: str, *opts: str) -> tuple[str, mlb.MlbReader, str]:
        d = os.path.join(self.tmp, shape)
        shutil.rmtree(d, ignore_errors=True)
        code, err = run_main(
            gen_random.main, ["--arch", "gemma4", "--shape", shape, "--vocab", "512", "-o", d]
        )
        self.assertEqual(code, 0, err)
        out = os.path.join(self.tmp, shape + ".mlb")
        code, err = run_main(cli.main, [d, "-o", out, *opts])
        self.assertEqual(code, 0, err)
        return d, mlb.MlbReader(out), err

    def test_e_tiny(self):
        d, r, err = self.convert("gemma4-e-tiny")
        t = r.tensors
        self.assertEqual(t["per_layer_token_embd"]["shape"], [512, 8 * 32])
        self.assertEqual(t["per_layer_model_proj"]["shape"], [8 * 32, 128])
        self.assertEqual(t["blk.0.inp_gate"]["shape"], [32, 128])
        self.assertEqual(t["blk.0.proj"]["shape"], [128, 32])
        self.assertEqual(t["blk.2.attn_q"]["shape"], [4 * 64, 128])  # a full layer
        self.assertEqual(t["blk.0.attn_k"]["shape"], [32, 128])
        self.assertEqual(t["blk.7.ffn_gate"]["shape"], [256, 128])  # double-wide
        for i in (5, 6, 7):  # KV-shared: their k/v tensors skipped
            self.assertNotIn(f"blk.{i}.attn_k", t)
            self.assertNotIn(f"blk.{i}.attn_v", t)
            self.assertNotIn(f"blk.{i}.attn_k_norm", t)
        self.assertIn("skipping 9 tensors", err)
        ck = st.Checkpoint(d)
        # norms as stored (Gemma 4 multiplies by w, not 1 + w)
        w = ck.get("model.language_model.layers.1.post_attention_layernorm.weight")
        np.testing.assert_array_equal(r.array("blk.1.attn_post_norm"), w)
        np.testing.assert_array_equal(
            r.array("blk.4.layer_output_scale"),
            ck.get("model.language_model.layers.4.layer_scalar"),
        )
        ck.close()
        self.assertEqual(r.config["layer_kv_source"], [-1] * 5 + [2, 4, 2])

    def test_moe_tiny(self):
        d, r, _ = self.convert("gemma4-moe-tiny", "--quant", "q8_0")
        t = r.tensors
        self.assertEqual(t["blk.1.ffn_gate_exps"]["shape"], [8, 32, 128])
        self.assertEqual(t["blk.1.ffn_down_exps"]["shape"], [8, 128, 32])
        self.assertEqual(t["blk.1.ffn_gate_inp"]["dtype"], "f32")
        self.assertNotIn("blk.1.attn_v", t)  # k_eq_v full layer
        self.assertIn("blk.0.attn_v", t)
        ck = st.Checkpoint(d)
        gu = ck.get("model.language_model.layers.1.experts.gate_up_proj")
        from convert import quant

        np.testing.assert_array_equal(
            r.array("blk.1.ffn_up_exps")[3], quant.round_trip(gu[3, 32:], "q8_0")
        )
        np.testing.assert_array_equal(
            r.array("blk.1.ffn_down_exps_scale"),
            ck.get("model.language_model.layers.1.router.per_expert_scale"),
        )
        ck.close()
        self.assertTrue(r.config["moe_beside_mlp"])

    def test_text_layout_converts_alike(self):
        files = []
        for layout in ("image-text", "text"):
            d = os.path.join(self.tmp, "dense-" + layout)
            code, err = run_main(
                gen_random.main,
                ["--arch", "gemma4", "--shape", "gemma4-dense-tiny", "--vocab", "512",
                 "--layout", layout, "-o", d],
            )  # fmt: skip
            self.assertEqual(code, 0, err)
            out = os.path.join(self.tmp, f"dense-{layout}.mlb")
            code, err = run_main(cli.main, [d, "-o", out])
            self.assertEqual(code, 0, err)
            files.append(mlb.MlbReader(out))
        a, b = files
        self.assertEqual(json.dumps(a.config, sort_keys=True), json.dumps(b.config, sort_keys=True))
        # the values differ (each tensor's random stream is seeded by its HF name)
        shapes = {n: (t["dtype"], t["shape"]) for n, t in a.tensors.items()}
        self.assertEqual(shapes, {n: (t["dtype"], t["shape"]) for n, t in b.tensors.items()})


if __name__ == "__main__":
    unittest.main()
