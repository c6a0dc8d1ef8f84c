"""Tests of the Qwen2 / Qwen3 / SmolLM2 / SmolLM3 paths of the Python tools.

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: config normalization (per-layer windows from max_window_layers / layer_types, SmolLM3
no_rope_layers and its interval, head_dim and theta defaults, tied default), refusals by field
name (partial rotary, unknown rope types, o_proj/MLP biases, q/k shapes vs heads), rope scaling
(convert vs ref_forward, yarn with head_dim != dim/heads, top-level original context), the chat
template guess, ref_forward against a naive loop forward for every feature (biases, q/k norm,
head_dim != dim/heads, sliding layers, NoPE layers, linear/yarn rope), and gen_random -> convert
of the tiny shapes (tensor table, values, config keys).
"""
from __future__ import annotations

import json
import os
import shutil
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import hf_config
from convert import mlb
from convert import safetensors_io as st
from convert import tokenizer as ctok
from convert import writer
from convert.families.llama import LLAMA
import gen_llama
import gen_random
import ref_common
import ref_forward
import ref_llama
from test_tools import naive_forward, run_main, write_micro

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

TOKS = os.path.join(REPO, ".models", "tokenizers")
HAVE_QWEN = os.path.isfile(os.path.join(TOKS, "qwen3", "tokenizer.json"))
HAVE_L3 = os.path.isfile(os.path.join(TOKS, "llama3", "tokenizer.json"))


def hf_cfg(model_type: str, **kw) -> dict:
    """A small config.json of the family, with overrides."""
    arch = {"qwen2": "qwen2", "qwen3": "qwen3", "smollm3": "smollm3", "llama": "llama"}[model_type]
    # fmt: off
    shape = dict(dim=64, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=16, ffn=64,
                 theta=10000.0, eps=1e-6, max_pos=512, tied=True, use_sliding_window=False,
                 sliding_window=None, max_window_layers=28, no_rope_layers=[1, 1, 1, 0])
    # fmt: on
    cfg = gen_llama.make_config(arch, shape, 100, 1, 2, "f32")
    cfg.update(kw)
    return {k: v for k, v in cfg.items() if v is not ...}


def norm(cfg: dict) -> dict:
    return LLAMA.normalize_config(cfg, {}, {"model": {"vocab": {"a": 0}}}, {})


# ------------------------------------------------------------------------------ config


class ConfigTest(unittest.TestCase):
    def test_qwen2_windows(self):
        self.assertEqual(norm(hf_cfg("qwen2"))["layer_window"], [0, 0, 0, 0])
        c = norm(hf_cfg("qwen2", use_sliding_window=True, sliding_window=16, max_window_layers=2))
        self.assertEqual(
            (c["layer_window"], c["sliding_window"], c["qkv_bias"], c["qk_norm"]),
            ([0, 0, 16, 16], 0, True, False),
        )
        self.assertNotIn("layer_rope", c)
        # use_sliding_window false nulls the window whatever max_window_layers says
        c = norm(hf_cfg("qwen2", use_sliding_window=False, sliding_window=16, max_window_layers=0))
        self.assertEqual(c["layer_window"], [0, 0, 0, 0])
        # an explicit layer_types list wins over max_window_layers
        lt = ["sliding_attention", "full_attention", "sliding_attention", "full_attention"]
        c = norm(
            hf_cfg(
                "qwen2",
                use_sliding_window=True,
                sliding_window=8,
                max_window_layers=3,
                layer_types=lt,
            )
        )
        self.assertEqual(c["layer_window"], [8, 0, 8, 0])
        c = norm(hf_cfg("qwen3", use_sliding_window=True, sliding_window=4, max_window_layers=3))
        self.assertEqual(
            (c["layer_window"], c["qk_norm"], c["qkv_bias"]), ([0, 0, 0, 4], True, False)
        )

    def test_smollm3_rope_layers(self):
        c = norm(hf_cfg("smollm3"))
        self.assertEqual(c["layer_rope"], [True, True, True, False])  # 1 = RoPE, 0 = NoPE
        self.assertEqual(c["layer_window"], [0, 0, 0, 0])
        c = norm(
            hf_cfg("smollm3", no_rope_layers=None, num_hidden_layers=8, no_rope_layer_interval=4)
        )
        self.assertEqual(c["layer_rope"], [True, True, True, False] * 2)
        c = norm(hf_cfg("smollm3", no_rope_layers=None, no_rope_layer_interval=2))
        self.assertEqual(c["layer_rope"], [True, False, True, False])
        # a longer list is fine (at least num_hidden_layers entries)
        self.assertEqual(
            norm(hf_cfg("smollm3", no_rope_layers=[0, 1, 1, 1, 0]))["layer_rope"],
            [False, True, True, True],
        )
        # default layer_types: the NoPE layers slide when sliding is on
        c = norm(hf_cfg("smollm3", use_sliding_window=True, sliding_window=8))
        self.assertEqual(c["layer_window"], [0, 0, 0, 8])

    def test_defaults(self):
        cfg = hf_cfg("smollm3")
        for k in ("rope_theta", "tie_word_embeddings"):
            del cfg[k]
        c = norm(cfg)
        self.assertTrue(c["tie_embeddings"])  # SmolLM3Config default
        np.testing.assert_allclose(c["rope_freqs"][1], 2000000.0 ** (-2 / 16))
        cfg = hf_cfg("qwen3")
        del cfg["head_dim"]
        self.assertEqual(norm(cfg)["head_dim"], 128)  # Qwen3Config default
        cfg = hf_cfg("qwen2")
        del cfg["head_dim"]
        self.assertEqual(norm(cfg)["head_dim"], 16)  # hidden_size / heads
        self.assertEqual(norm(hf_cfg("qwen3", tie_word_embeddings=False))["tie_embeddings"], False)
        self.assertNotIn("qkv_bias", norm(hf_cfg("llama")))  # llama/mistral files unchanged

    def test_refusals_name_the_field(self):
        cases = [
            (hf_cfg("qwen3", partial_rotary_factor=0.5), "partial_rotary_factor"),
            (
                hf_cfg(
                    "qwen2",
                    rope_scaling=None,
                    rope_parameters={"rope_type": "default", "partial_rotary_factor": 0.25},
                ),
                "partial_rotary_factor",
            ),
            (hf_cfg("qwen2", rope_scaling={"rope_type": "dynamic", "factor": 2.0}), "dynamic"),
            (
                hf_cfg(
                    "qwen3",
                    rope_scaling={"rope_type": "longrope", "short_factor": [1], "long_factor": [1]},
                ),
                "longrope",
            ),
            (hf_cfg("qwen3", attention_bias=True), "attention_bias"),
            (hf_cfg("smollm3", attention_bias=True), "o_proj"),
            (hf_cfg("llama", attention_bias=True), "attention_bias"),
            (hf_cfg("smollm3", mlp_bias=True), "mlp_bias"),
            (hf_cfg("qwen2", num_key_value_heads=3), "num_key_value_heads"),
            (hf_cfg("qwen2", layer_types=["full_attention"] * 3), "layer_types"),
            (hf_cfg("qwen2", layer_types=["chunked_attention"] * 4), "layer_types[0]"),
            (
                hf_cfg("qwen2", use_sliding_window=False, layer_types=["sliding_attention"] * 4),
                "use_sliding_window",
            ),
            (hf_cfg("smollm3", no_rope_layers=[1, 0]), "no_rope_layers"),
            (hf_cfg("smollm3", no_rope_layers=[1, 2, 1, 1]), "no_rope_layers"),
            (hf_cfg("qwen2", architectures=["Qwen2ForSequenceClassification"]), "architectures"),
        ]
        for cfg, needle in cases:
            with self.subTest(needle=needle):
                with self.assertRaises(hf_config.ConvertError) as cm:
                    norm(cfg)
                self.assertIn(needle, str(cm.exception))
        self.assertTrue(norm(hf_cfg("qwen2", attention_bias=True))["qkv_bias"])  # not a Qwen2 key

    def test_full_shapes_normalize(self):
        """The benchmark shapes (not generated here: 0.5-3B weights) give configs that convert
        accepts with gen_random's own tensor table."""
        want = {
            "qwen2.5-0.5b": ("qwen2", dict(head_dim=64, qkv_bias=True, layer_window=[0] * 24)),
            "qwen3-0.6b": ("qwen3", dict(head_dim=128, qk_norm=True, layer_window=[0] * 28)),
            "smollm3-3b": (
                "smollm3",
                dict(head_dim=128, layer_rope=[(i + 1) % 4 != 0 for i in range(36)]),
            ),
            "smollm2-135m": ("smollm2", dict(head_dim=64, arch="llama")),
            "qwen2-tiny": ("qwen2", dict(layer_window=[0, 0, 16, 16])),
            "tiny": ("qwen2", dict(layer_window=[0, 0])),  # any shape with any arch
            "smollm3-tiny": ("smollm3", dict(layer_rope=[True, False, True, False])),
        }
        for shape, (arch, keys) in want.items():
            s = gen_llama.SHAPES[shape]
            n_vocab = s.get("vocab", 151936 if s["tok"] == "qwen3" else 128256)
            cfg = gen_llama.make_config(arch, s, n_vocab, 1, 2, "bf16")
            c = norm(cfg)
            specs = gen_llama.tensor_specs(s, n_vocab, arch)
            LLAMA.check_tensors(
                LLAMA.tensor_plan(c), {n: spec[0] for n, spec in specs.items()}, c, "lm_head.weight"
            )
            with self.subTest(shape=shape):
                self.assertEqual({k: c[k] for k in keys}, keys)
                self.assertTrue(c["tie_embeddings"] or shape == "tiny")

    def test_qk_shape_refusals(self):
        c = norm(hf_cfg("qwen3"))
        plan = LLAMA.tensor_plan(c)
        shapes = {hf: s for _, hf, _, s in plan}
        names = {hf for _, hf, _, _ in plan}
        self.assertIn("model.layers.0.self_attn.q_norm.weight", names)
        self.assertEqual(shapes["model.layers.0.self_attn.k_norm.weight"], (16,))
        bad = dict(shapes)
        bad["model.layers.0.self_attn.k_proj.weight"] = (48, 64)
        with self.assertRaises(hf_config.ConvertError) as cm:
            LLAMA.check_tensors(plan, bad, c, "lm_head.weight")
        self.assertIn("num_key_value_heads", str(cm.exception))
        self.assertIn("k_proj", str(cm.exception))
        bad = dict(shapes)
        bad["model.layers.0.self_attn.q_proj.weight"] = (32, 64)
        with self.assertRaises(hf_config.ConvertError) as cm:
            LLAMA.check_tensors(plan, bad, c, "lm_head.weight")
        self.assertIn("num_attention_heads", str(cm.exception))
        q2 = norm(hf_cfg("qwen2"))
        names = {hf: s for _, hf, _, s in LLAMA.tensor_plan(q2)}
        self.assertEqual(names["model.layers.3.self_attn.v_proj.bias"], (32,))
        self.assertEqual(writer.dtype_for("norm", "q4_0", set()), "f32")


ROPE_CASES = [
    {
        "model_type": "qwen2",
        "rope_theta": 1e6,
        "max_position_embeddings": 131072,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768},
    },
    {"model_type": "smollm3", "max_position_embeddings": 4096},  # default theta 2e6
    {
        "model_type": "qwen3",
        "rope_theta": 1e6,
        "max_position_embeddings": 65536,
        "original_max_position_embeddings": 8192,  # top-level wins
        "rope_scaling": {"rope_type": "yarn", "original_max_position_embeddings": 32768},
    },
    {
        "model_type": "qwen3",
        "max_position_embeddings": 8192,
        "rope_parameters": {
            "full_attention": {"rope_type": "linear", "factor": 3.0, "rope_theta": 5e5},
            "sliding_attention": {"rope_type": "linear", "factor": 3.0, "rope_theta": 5e5},
        },
    },
    {
        "model_type": "qwen2",
        "rope_theta": 1e4,
        "max_position_embeddings": 4096,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": 8.0,
            "mscale": 1.0,
            "mscale_all_dim": 0.5,
            "beta_fast": 16,
            "beta_slow": 2,
            "truncate": False,
        },
    },
]


class RopeArchTest(unittest.TestCase):
    def test_convert_and_ref_agree(self):
        for cfg in ROPE_CASES:
            for hd in (64, 128):
                a, fa = hf_config.compute_rope(cfg, hd)
                b, fb = ref_common.inv_frequencies(cfg, hd)
                self.assertEqual(len(a), hd // 2)
                np.testing.assert_allclose(a, b, rtol=1e-12, err_msg=json.dumps(cfg))
                self.assertAlmostEqual(fa, fb, places=12)

    def test_yarn_values(self):
        inv, attn = hf_config.compute_rope(ROPE_CASES[0], 128)
        plain, _ = hf_config.compute_rope({"rope_theta": 1e6}, 128)
        self.assertAlmostEqual(attn, 0.1 * np.log(4.0) + 1.0)
        self.assertEqual(inv[0], plain[0])  # fastest dims extrapolated
        self.assertAlmostEqual(inv[-1], plain[-1] / 4)  # slowest interpolated
        inv, attn = hf_config.compute_rope(ROPE_CASES[2], 128)  # factor = 65536 / 8192
        self.assertAlmostEqual(inv[-1], plain[-1] / 8)
        self.assertAlmostEqual(attn, 0.1 * np.log(8.0) + 1.0)
        _, attn = hf_config.compute_rope(ROPE_CASES[4], 64)  # mscale ratio
        self.assertAlmostEqual(attn, (0.1 * np.log(8) + 1) / (0.05 * np.log(8) + 1))

    def test_per_layer_type_rope_must_agree(self):
        cfg = json.loads(json.dumps(ROPE_CASES[3]))
        cfg["rope_parameters"]["sliding_attention"]["factor"] = 2.0
        with self.assertRaises(hf_config.ConvertError):
            hf_config.compute_rope(cfg, 64)


class ChatTemplateTest(unittest.TestCase):
    QWEN25 = (
        "{%- if messages[0]['role'] == 'system' %}"
        "{{- '<|im_start|>system\\n' + messages[0]['content'] }}"
        "{%- else %}{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. "
        "You are a helpful assistant.<|im_end|>\\n' }}{%- endif %}"
    )
    QWEN2 = (
        "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>system\\nYou are a "
        "helpful assistant.<|im_end|>\\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\\n'}}"
    )
    SMOL3 = (
        "{{- '<|im_start|>system\\n' -}}"
        "{{- '## Metadata\\n\\nKnowledge Cutoff Date: June 2025\\n' -}}"
        "{{- 'Reasoning Mode: ' + reasoning_mode + '\\n\\n' -}}"
    )
    SMOL2 = (
        "{% for message in messages %}"
        "{% if loop.first and messages[0]['role'] != 'system' %}{{ '<|im_start|>"
        "system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
        "<|im_end|>\n' }}"
        "{% endif %}"
    )
    CHATML = (
        "{% for m in messages %}"
        "{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}"
    )

    def test_guess(self):
        l3vocab = {
            "model": {"vocab": {"a": 0}},
            "added_tokens": [
                {"id": 1, "content": "<|start_header_id|>"},
                {"id": 2, "content": "<|im_start|>"},
            ],
        }
        plain = {"model": {"vocab": {"a": 0}}}
        g = ctok.guess_chat_template
        self.assertEqual(g(plain, {"chat_template": self.QWEN25}), "qwen")
        self.assertEqual(
            g(l3vocab, {"chat_template": self.SMOL3}), "smollm3"
        )  # template before vocabulary
        self.assertEqual(g(l3vocab, {"chat_template": self.SMOL3 + self.SMOL2}), "smollm3")
        self.assertEqual(g(plain, {"chat_template": self.SMOL2}), "smollm")
        self.assertEqual(
            g(plain, {"chat_template": self.CHATML + "{{ '<think>\n\n</think>' }}"}), "qwen3"
        )
        self.assertEqual(g(plain, {"chat_template": self.CHATML}), "chatml")
        self.assertEqual(g(plain, {"chat_template": self.QWEN2}), "")  # other default system prompt
        self.assertEqual(g(l3vocab, {}), "llama3")
        self.assertEqual(
            g(plain, {"chat_template": [{"name": "default", "template": self.QWEN25}]}), "qwen"
        )

    @unittest.skipUnless(HAVE_QWEN, "run scripts/fetch_tokenizers.sh")
    def test_qwen3_tokenizer(self):
        files = ctok.read_tokenizer_files(os.path.join(TOKS, "qwen3"))
        tj, tc = json.loads(files["tokenizer.json"]), json.loads(files["tokenizer_config.json"])
        self.assertEqual(ctok.guess_chat_template(tj, tc), "qwen3")


# ------------------------------------------------------------------------------ ref_forward


def micro(d: str, arch: str, rope: str | None = None, **shape_kw) -> tuple[dict, dict]:
    # fmt: off
    shape = dict(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, head_dim=8, ffn=64,
                 theta=10000.0, eps=1e-6, max_pos=64, tied=True, use_sliding_window=False,
                 sliding_window=None, max_window_layers=28, no_rope_layers=[1, 1])
    # fmt: on
    shape.update(shape_kw)
    shape["rope_scaling"], shape["max_pos"] = gen_llama.rope_scaling(rope, 4.0, shape["max_pos"])
    return write_micro(d, arch, shape, 40, 5)


class RefForwardArchTest(unittest.TestCase):
    # (arch, rope, shape overrides, expected windows, expected rope flags)
    CASES = [
        (
            "qwen2",
            None,
            dict(use_sliding_window=True, sliding_window=3, max_window_layers=1),
            [0, 3],
            [True, True],
        ),
        ("qwen3", None, dict(head_dim=16), [0, 0], [True, True]),  # 4 heads x 16 != dim 32
        ("smollm3", None, dict(no_rope_layers=[1, 0]), [0, 0], [True, False]),
        ("smollm3", None, dict(no_rope_layers=[0, 1], theta=5e6), [0, 0], [False, True]),
        ("smollm2", "linear", dict(tied=False), [0, 0], [True, True]),
        ("qwen3", "yarn", dict(head_dim=16, max_pos=16), [0, 0], [True, True]),
        ("qwen2", "yarn", dict(max_pos=16), [0, 0], [True, True]),
    ]

    def test_matches_naive_loops(self):
        tokens = [1, 5, 9, 3, 30, 7, 2]
        with tempfile.TemporaryDirectory() as d:
            for i, (arch, rope, kw, windows, use_rope) in enumerate(self.CASES):
                sub = os.path.join(d, f"{i}{arch}")
                cfg, W = micro(sub, arch, rope, **kw)
                self.assertEqual(ref_llama.layer_schedule(cfg), (windows, use_rope))
                c = norm(cfg)
                self.assertEqual(c.get("layer_window", [0, 0]), windows)
                self.assertEqual(c.get("layer_rope", [True, True]), use_rope)
                inv, attn = hf_config.compute_rope(cfg, cfg["head_dim"])
                if rope == "yarn":
                    self.assertGreater(attn, 1.0)
                want = naive_forward(cfg, W, tokens, windows, use_rope, np.array(inv), attn)
                got = ref_forward.forward(sub, tokens, np.float64)
                np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=sub)
                got32 = ref_forward.forward(sub, tokens)
                np.testing.assert_allclose(got32, want, rtol=1e-3, atol=1e-3, err_msg=sub)

    def test_features_change_the_logits(self):
        """Each feature must matter to the oracle (else a runtime that ignores it would pass)."""
        tokens = [3, 4, 5, 6, 7, 8, 9]
        with tempfile.TemporaryDirectory() as d:

            def run(name, arch, rope=None, **kw):
                micro(os.path.join(d, name), arch, rope, **kw)
                return ref_forward.forward(os.path.join(d, name), tokens, np.float64)

            slide = run(
                "slide", "qwen2", use_sliding_window=True, sliding_window=3, max_window_layers=1
            )
            full = run("full", "qwen2")
            np.testing.assert_allclose(slide[:3], full[:3], atol=1e-12)  # window not yet reached
            self.assertGreater(np.abs(slide[3:] - full[3:]).max(), 1e-4)
            nope = run("nope", "smollm3", no_rope_layers=[1, 0])
            allrope = run("allrope", "smollm3", no_rope_layers=[1, 1])
            np.testing.assert_allclose(
                nope[0], allrope[0], atol=1e-12
            )  # position 0: rope is identity
            self.assertGreater(np.abs(nope - allrope).max(), 1e-4)
            for rope in ("linear", "yarn"):
                scaled = run(rope, "llama", rope, max_pos=16)
                plain = run(rope + "0", "llama", max_pos=16)
                self.assertGreater(np.abs(scaled - plain).max(), 1e-4, rope)


# ---------------------------------------------------------------------- gen_random + convert


@unittest.skipUnless(HAVE_QWEN and HAVE_L3, "run scripts/fetch_tokenizers.sh")
class TinyArchConvertTest(unittest.TestCase):
    tmp: tempfile.TemporaryDirectory

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dirs = {}
        for arch, shape, extra in (
            ("qwen2", "qwen2-tiny", []),
            ("qwen3", "qwen3-tiny", ["--rope", "yarn"]),
            ("smollm3", "smollm3-tiny", ["--dtype", "bf16"]),
            ("smollm2", "smollm2-tiny", ["--rope", "linear", "--rope-factor", "2"]),
        ):
            d = os.path.join(cls.tmp.name, shape)
            code, err = run_main(
                gen_random.main, ["--arch", arch, "--shape", shape, "-o", d] + extra
            )
            assert code == 0, err
            cls.dirs[shape] = d

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def config(self, shape: str) -> dict:
        with open(os.path.join(self.dirs[shape], "config.json")) as f:
            return json.load(f)

    def names(self, shape: str) -> list[str]:
        ck = st.Checkpoint(self.dirs[shape])
        try:
            return ck.names()
        finally:
            ck.close()

    def convert(self, shape: str, quant: str) -> mlb.MlbReader:
        out = os.path.join(self.tmp.name, f"{shape}.{quant}.mlb")
        code, err = run_main(cli.main, [self.dirs[shape], "-o", out, "--quant", quant])
        self.assertEqual(code, 0, err)
        return mlb.MlbReader(out)

    def test_gen_configs(self):
        q2, q3, s3, s2 = (
            self.config(s) for s in ("qwen2-tiny", "qwen3-tiny", "smollm3-tiny", "smollm2-tiny")
        )
        self.assertEqual(
            (
                q2["architectures"],
                q2["use_sliding_window"],
                q2["sliding_window"],
                q2["max_window_layers"],
                q2["num_hidden_layers"],
                q2["vocab_size"],
            ),
            (["Qwen2ForCausalLM"], True, 16, 2, 4, 151936),
        )
        self.assertEqual(
            (q3["head_dim"] * q3["num_attention_heads"], q3["hidden_size"]), (256, 128)
        )
        self.assertEqual(
            q3["rope_scaling"],
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096},
        )
        self.assertEqual(q3["max_position_embeddings"], 16384)
        self.assertEqual(
            (s3["model_type"], s3["no_rope_layers"], s3["vocab_size"]),
            ("smollm3", [1, 0, 1, 0], 128256),
        )
        self.assertEqual(
            (s2["model_type"], s2["architectures"], s2["rope_scaling"]),
            ("llama", ["LlamaForCausalLM"], {"rope_type": "linear", "factor": 2.0}),
        )
        names = self.names("qwen2-tiny")
        self.assertIn("model.layers.3.self_attn.k_proj.bias", names)
        self.assertNotIn("lm_head.weight", names)
        self.assertIn("model.layers.2.self_attn.q_norm.weight", self.names("qwen3-tiny"))
        for shape in self.dirs:
            logits = ref_forward.forward(self.dirs[shape], [1, 450, 4996, 17354, 3, 90, 1000])
            self.assertTrue(1.0 < logits.std(axis=1).mean() < 8, (shape, logits.std(axis=1)))

    def test_convert_qwen2_q8(self):
        r = self.convert("qwen2-tiny", "q8_0")
        c = r.config
        self.assertEqual(
            (
                c["arch"],
                c["qkv_bias"],
                c["qk_norm"],
                c["layer_window"],
                c["sliding_window"],
                c["tie_embeddings"],
                c["eos_ids"],
                c["chat_template"],
            ),
            ("qwen2", True, False, [0, 0, 16, 16], 0, True, [151645, 151643], "qwen3"),
        )
        self.assertNotIn("layer_rope", c)
        self.assertEqual(r.tensors["blk.1.attn_k_bias"]["dtype"], "f32")
        self.assertEqual(r.tensors["blk.1.attn_k_bias"]["shape"], [64])
        self.assertEqual(r.tensors["blk.1.attn_k"]["dtype"], "q8_0")
        ck = st.Checkpoint(self.dirs["qwen2-tiny"])
        np.testing.assert_array_equal(
            r.array("blk.2.attn_q_bias"), ck.get("model.layers.2.self_attn.q_proj.bias")
        )
        ck.close()
        self.assertNotIn("output", r.tensors)

    def test_convert_qwen3_yarn_f32(self):
        r = self.convert("qwen3-tiny", "f32")
        c = r.config
        self.assertEqual(
            (c["arch"], c["head_dim"], c["qk_norm"], c["qkv_bias"], c["layer_window"]),
            ("qwen3", 64, True, False, [0, 0, 0]),
        )
        inv, attn = ref_common.inv_frequencies(self.config("qwen3-tiny"), 64)
        np.testing.assert_allclose(c["rope_freqs"], inv, rtol=1e-12)
        self.assertAlmostEqual(c["rope_attn_factor"], attn)
        self.assertAlmostEqual(attn, 0.1 * np.log(4) + 1)
        self.assertEqual(r.tensors["blk.0.attn_q"]["shape"], [256, 128])
        self.assertEqual(r.tensors["blk.0.attn_output"]["shape"], [128, 256])
        self.assertEqual(r.tensors["blk.0.attn_k_norm"]["shape"], [64])
        ck = st.Checkpoint(self.dirs["qwen3-tiny"])
        np.testing.assert_array_equal(
            r.array("blk.1.attn_q_norm"), ck.get("model.layers.1.self_attn.q_norm.weight")
        )
        ck.close()

    def test_convert_smollm3_and_smollm2(self):
        c = self.convert("smollm3-tiny", "q4_0").config
        self.assertEqual(
            (
                c["arch"],
                c["layer_rope"],
                c["layer_window"],
                c["qkv_bias"],
                c["qk_norm"],
                c["chat_template"],
                c["n_vocab"],
            ),
            ("smollm3", [True, False, True, False], [0, 0, 0, 0], False, False, "llama3", 128256),
        )
        np.testing.assert_allclose(c["rope_freqs"][1], 5e6 ** (-2 / 32))
        c = self.convert("smollm2-tiny", "f16").config
        self.assertEqual((c["arch"], c["n_vocab"]), ("llama", 151669))
        self.assertNotIn("layer_window", c)
        base, _ = hf_config.compute_rope({"rope_theta": 100000.0}, 32)
        np.testing.assert_allclose(c["rope_freqs"], np.array(base) / 2)

    def test_refusals_on_disk(self):
        d = os.path.join(self.tmp.name, "obias")
        shutil.copytree(self.dirs["qwen2-tiny"], d)
        st.save_dict(
            os.path.join(d, "extra.safetensors"),
            {"model.layers.0.self_attn.o_proj.bias": np.zeros(128, np.float32)},
        )
        out = os.path.join(self.tmp.name, "obias.mlb")
        code, err = run_main(cli.main, [d, "-o", out])
        self.assertEqual(code, 2)
        self.assertIn("o_proj.bias", err)
        self.assertFalse(os.path.exists(out))
        code, err = run_main(
            gen_random.main,
            [
                "--arch",
                "llama",
                "--shape",
                "llama3-1b",
                "--rope",
                "yarn",
                "-o",
                os.path.join(self.tmp.name, "x"),
            ],
        )
        self.assertEqual(code, 2)
        self.assertIn("--rope", err)


if __name__ == "__main__":
    unittest.main()
