"""Tests of the Mixture-of-Experts paths of the Python tools (tools/convert/families/moe.py,
tests/reference/ref_moe.py, gen_moe.py).

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
Covers: the reference's routing and sparse block against a slow per-token loop (exact ties: the
lower expert index wins), the sparse/dense layer rule, config normalization and refusals by
field, gen_random -> convert for both families (config keys, tensor names, shapes, dtypes, the
expert rows' Q8_0 round trip), the fused and per-expert layouts giving the same .mlb bytes,
mis-shaped expert tensors named, and that --close-router's planted ties matter.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import mlb
from convert import quant
from convert import safetensors_io as st
from convert.families.moe import QWEN3_MOE, QWEN35_MOE
from convert.hf_config import ConvertError
import gen_random
import ref_forward
import ref_moe
from test_tools import run_main

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
HAVE_TOK = os.path.isfile(os.path.join(REPO, ".models", "tokenizers", "qwen3", "tokenizer.json"))
TOK = {"model": {"vocab": {"<|endoftext|>": 151643, "<|im_end|>": 151645}}}

# Qwen/Qwen3-30B-A3B's config.json (the keys read), as published.
Q30 = {
    "architectures": ["Qwen3MoeForCausalLM"],
    "model_type": "qwen3_moe",
    "vocab_size": 151936,
    "hidden_size": 2048,
    "intermediate_size": 6144,
    "num_hidden_layers": 48,
    "num_attention_heads": 32,
    "num_key_value_heads": 4,
    "head_dim": 128,
    "hidden_act": "silu",
    "max_position_embeddings": 40960,
    "rms_norm_eps": 1e-6,
    "rope_theta": 1000000.0,
    "attention_bias": False,
    "use_sliding_window": False,
    "sliding_window": None,
    "max_window_layers": 48,
    "tie_word_embeddings": False,
    "decoder_sparse_step": 1,
    "moe_intermediate_size": 768,
    "num_experts": 128,
    "num_experts_per_tok": 8,
    "norm_topk_prob": True,
    "mlp_only_layers": [],
    "bos_token_id": 151643,
    "eos_token_id": 151645,
}


def slow_block(x: np.ndarray, m: ref_moe.MoeWeights, k: int, normalize: bool) -> np.ndarray:
    """The sparse block token by token, choosing experts by repeated argmax (first maximum)."""
    out = np.zeros_like(x)
    for t in range(x.shape[0]):
        logits = m.router @ x[t]
        p = np.exp(logits - logits.max())
        p = p / p.sum()
        left, chosen = p.copy(), []
        for _ in range(k):
            e = int(np.argmax(left))  # numpy: the first of equal maxima
            chosen.append(e)
            left[e] = -np.inf
        w = p[chosen] / (p[chosen].sum() if normalize else 1.0)
        for e, we in zip(chosen, w):
            y = (m.down[e] @ (ref_moe.silu(m.gate[e] @ x[t]) * (m.up[e] @ x[t]))) * we
            out[t] += y
        if m.shared is not None:
            g, u, d, sg = m.shared
            out[t] += ref_moe.sigmoid(sg @ x[t]) * (d @ (ref_moe.silu(g @ x[t]) * (u @ x[t])))
    return out


def random_block(rng: np.random.Generator, n: int, h: int, f: int, shared: bool):
    def r(*s: int) -> np.ndarray:
        return rng.standard_normal(s) / np.sqrt(s[-1])

    sh = (r(24, h), r(24, h), r(h, 24), r(1, h)) if shared else None
    return ref_moe.MoeWeights(r(n, h), r(n, f, h), r(n, f, h), r(n, h, f), sh)


class RouteTest(unittest.TestCase):
    def test_ties_take_the_lower_index(self):
        logits = np.array([[1.0, 3.0, 3.0, 0.5], [2.0, 2.0, 2.0, 2.0], [0.0, 5.0, 1.0, 5.0]])
        top, w = ref_moe.route(logits, 2, True)
        self.assertEqual(top.tolist(), [[1, 2], [0, 1], [1, 3]])
        np.testing.assert_allclose(w, 0.5)
        top, w = ref_moe.route(logits, 1, False)
        self.assertEqual(top[:, 0].tolist(), [1, 0, 1])
        self.assertAlmostEqual(w[1, 0], 0.25)  # not renormalized: the full-softmax probability

    def test_block_equals_slow_loop(self):
        rng = np.random.default_rng(5)
        for shared in (False, True):
            for k, normalize in ((1, False), (2, True), (3, False), (8, True)):
                with self.subTest(shared=shared, k=k, normalize=normalize):
                    m = random_block(rng, 8, 32, 16, shared)
                    x = rng.standard_normal((7, 32))
                    np.testing.assert_allclose(
                        ref_moe.moe_block(x, m, k, normalize),
                        slow_block(x, m, k, normalize),
                        rtol=1e-12,
                        atol=1e-12,
                    )

    def test_exact_tie_in_the_block(self):
        rng = np.random.default_rng(6)
        m = random_block(rng, 6, 32, 16, False)
        m.router[4] = m.router[2]  # experts 2 and 4 always tie
        x = rng.standard_normal((40, 32))
        got = ref_moe.moe_block(x, m, 2, True)
        np.testing.assert_allclose(got, slow_block(x, m, 2, True), rtol=1e-12, atol=1e-12)
        top, _ = ref_moe.route(x @ m.router.T, 2, True)
        self.assertFalse((top == 4).any() and not (top == 2).any())
        # a token whose 2nd place is the tie uses expert 2, never expert 4 alone
        self.assertTrue(all(2 in row for row in top.tolist() if 4 in row))


class ConfigTest(unittest.TestCase):
    def norm(self, cfg: dict, fam=QWEN3_MOE) -> dict:
        return fam.normalize_config(cfg, {}, TOK, {})

    def test_qwen3_30b_a3b(self):
        c = self.norm(Q30)
        self.assertEqual(c["arch"], "qwen3_moe")
        self.assertEqual((c["n_experts"], c["n_experts_used"], c["expert_ffn_dim"]), (128, 8, 768))
        self.assertEqual((c["norm_topk_prob"], c["shared_expert_ffn_dim"]), (True, 0))
        self.assertEqual(c["layer_moe"], [True] * 48)
        self.assertEqual((c["head_dim"], c["ffn_dim"], c["qk_norm"]), (128, 6144, True))

    def test_sparse_layer_rule(self):
        # transformers: not in mlp_only_layers and (i + 1) % decoder_sparse_step == 0
        for step, only, want in (
            (1, [], [True] * 6),
            (2, [], [False, True, False, True, False, True]),
            (3, [], [False, False, True, False, False, True]),
            (1, [0, 4], [False, True, True, True, False, True]),
            (2, [3, 7], [False, True, False, False, False, True]),
        ):
            cfg = dict(Q30, num_hidden_layers=6, decoder_sparse_step=step, mlp_only_layers=only)
            with self.subTest(step=step, only=only):
                self.assertEqual(self.norm(cfg)["layer_moe"], want)
                self.assertEqual(ref_moe.sparse_layers(cfg), want)

    def test_defaults(self):
        cfg = {"model_type": "qwen3_moe", "architectures": ["Qwen3MoeForCausalLM"]}
        c = self.norm(cfg)  # Qwen3MoeConfig: head_dim = hidden / heads, norm_topk_prob false
        self.assertEqual((c["dim"], c["head_dim"], c["n_experts"]), (2048, 64, 128))
        self.assertFalse(c["norm_topk_prob"])
        c = self.norm({"model_type": "qwen3_5_moe_text"}, QWEN35_MOE)
        self.assertEqual((c["n_experts"], c["n_experts_used"], c["expert_ffn_dim"]), (256, 8, 512))
        self.assertEqual((c["shared_expert_ffn_dim"], c["ffn_dim"]), (512, 0))
        self.assertTrue(c["norm_topk_prob"])  # Qwen3.5-MoE always renormalizes
        self.assertEqual(c["layer_moe"], [True] * 40)
        self.assertEqual(c["arch"], "qwen3_5_moe")

    def test_refusals_name_the_field(self):
        for cfg, field in (
            (dict(Q30, num_experts=0), "num_experts"),
            (dict(Q30, num_experts_per_tok=129), "num_experts_per_tok 129"),
            (dict(Q30, num_experts_per_tok=0), "num_experts_per_tok"),
            (dict(Q30, moe_intermediate_size=0), "moe_intermediate_size"),
            (dict(Q30, decoder_sparse_step=0), "decoder_sparse_step"),
            (dict(Q30, mlp_only_layers="1"), "mlp_only_layers"),
            (dict(Q30, use_sliding_window=True), "use_sliding_window"),
            (dict(Q30, hidden_act="gelu"), "hidden_act"),
            (dict(Q30, architectures=["Qwen3ForCausalLM"]), "architectures"),
        ):
            with self.subTest(field=field), self.assertRaises(ConvertError) as e:
                self.norm(cfg)
            self.assertIn(field, str(e.exception))
            self.assertNotIn("\n", str(e.exception))
        text = {"model_type": "qwen3_5_moe_text", "num_experts": 4, "num_experts_per_tok": 5}
        with self.assertRaises(ConvertError) as e:
            self.norm({"model_type": "qwen3_5_moe", "text_config": text}, QWEN35_MOE)
        self.assertIn(
            "text_config.num_experts_per_tok 5 is more than num_experts 4", str(e.exception)
        )


@unittest.skipUnless(HAVE_TOK, "needs .models/tokenizers/qwen3 (scripts/fetch_tokenizers.sh)")
class ConvertMoeTest(unittest.TestCase):
    GEN = ["--seed", "3", "--vocab", "1024", "--tokenizer", "qwen3"]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls) -> None:
        shutil.rmtree(cls.tmp)

    def gen(self, arch: str, *extra: str) -> str:
        d = os.path.join(self.tmp, "ck")
        shutil.rmtree(d, ignore_errors=True)
        code, err = run_main(gen_random.main, ["--arch", arch, *self.GEN, *extra, "-o", d])
        self.assertEqual(code, 0, err)
        return d

    def convert(self, d: str, out: str, *opts: str) -> mlb.MlbReader:
        code, err = run_main(cli.main, [d, "-o", out, *opts])
        self.assertEqual(code, 0, err)
        return mlb.MlbReader(out)

    def test_layouts_give_the_same_bytes(self):
        # the same directory both times, so that even the source record is the same
        for arch in ("qwen3_moe", "qwen3_5_moe"):
            files = []
            for layout in ("per-expert", "fused"):
                d = self.gen(arch, "--experts", layout, "--close-router")
                files.append(os.path.join(self.tmp, f"{arch}.{layout}.mlb"))
                self.convert(d, files[-1], "--quant", "q4_0", "--q8", "down")
            with open(files[0], "rb") as a, open(files[1], "rb") as b:
                self.assertEqual(a.read(), b.read(), arch)

    def test_qwen3_moe_tensors(self):
        d = self.gen("qwen3_moe")
        r = self.convert(d, os.path.join(self.tmp, "q3.mlb"), "--quant", "q8_0")
        c = r.config
        self.assertEqual(c["layer_moe"], [True, False, True, True])  # mlp_only_layers [1]
        self.assertEqual((c["n_experts"], c["n_experts_used"], c["expert_ffn_dim"]), (8, 2, 32))
        self.assertEqual((c["shared_expert_ffn_dim"], c["ffn_dim"]), (0, 128))
        t = r.tensors
        self.assertEqual(t["blk.0.ffn_gate_inp"]["dtype"], "f32")
        self.assertEqual(t["blk.0.ffn_gate_inp"]["shape"], [8, 64])
        self.assertEqual(t["blk.0.ffn_gate_exps"]["shape"], [8, 32, 64])
        self.assertEqual(t["blk.0.ffn_up_exps"]["shape"], [8, 32, 64])
        self.assertEqual(t["blk.0.ffn_down_exps"]["shape"], [8, 64, 32])
        self.assertEqual(t["blk.0.ffn_down_exps"]["dtype"], "q8_0")
        self.assertEqual(t["blk.1.ffn_gate"]["shape"], [128, 64])
        self.assertNotIn("blk.1.ffn_gate_exps", t)
        self.assertNotIn("blk.0.ffn_gate", t)
        self.assertFalse(any("shexp" in n for n in t))
        ck = st.Checkpoint(d)
        router = ck.get("model.layers.2.mlp.gate.weight")
        np.testing.assert_array_equal(r.array("blk.2.ffn_gate_inp"), router)
        for e in (0, 5):
            for part, name in (("gate", "ffn_gate_exps"), ("down", "ffn_down_exps")):
                w = ck.get(f"model.layers.3.mlp.experts.{e}.{part}_proj.weight")
                np.testing.assert_array_equal(
                    r.array(f"blk.3.{name}")[e], quant.round_trip(w, "q8_0")
                )
        ck.close()

    def test_qwen35_moe_tensors(self):
        d = self.gen("qwen3_5_moe")
        r = self.convert(d, os.path.join(self.tmp, "q35.mlb"), "--quant", "q4_0")
        c, t = r.config, r.tensors
        self.assertEqual(c["layer_moe"], [True] * 4)
        self.assertEqual(c["layer_linear"], [True, False, True, False])
        self.assertEqual((c["shared_expert_ffn_dim"], c["ffn_dim"]), (64, 0))
        self.assertTrue(c["norm_topk_prob"])
        want = {
            "ffn_gate_inp": ("f32", [8, 128]),
            "ffn_gate_exps": ("q4_0", [8, 32, 128]),
            "ffn_up_exps": ("q4_0", [8, 32, 128]),
            "ffn_down_exps": ("q4_0", [8, 128, 32]),
            "ffn_gate_inp_shexp": ("f32", [1, 128]),
            "ffn_gate_shexp": ("q4_0", [64, 128]),
            "ffn_up_shexp": ("q4_0", [64, 128]),
            "ffn_down_shexp": ("q4_0", [128, 64]),
        }
        for i in range(4):
            for n, (dt, shape) in want.items():
                self.assertEqual(
                    (t[f"blk.{i}.{n}"]["dtype"], t[f"blk.{i}.{n}"]["shape"]), (dt, shape)
                )
            self.assertNotIn(f"blk.{i}.ffn_gate", t)
        self.assertFalse(any("visual" in n or "mtp" in n for n in t))
        # the ffn_norm of a Qwen3.5 layer is still stored as 1 + w; the router is not
        ck = st.Checkpoint(d)
        p = "model.language_model.layers.1."
        np.testing.assert_array_equal(r.array("blk.1.ffn_gate_inp"), ck.get(p + "mlp.gate.weight"))
        gu = ck.get(p + "mlp.experts.gate_up_proj")
        np.testing.assert_array_equal(
            r.array("blk.1.ffn_up_exps")[6], quant.round_trip(gu[6, 32:], "q4_0")
        )
        ck.close()

    def test_mismatched_expert_shapes_are_named(self):
        d = self.gen("qwen3_moe")
        path = os.path.join(d, "model.safetensors")
        ck = st.SafetensorsFile(path)
        arrays = {n: ck.get(n) for n in ck.tensors}
        ck.close()
        bad = "model.layers.2.mlp.experts.5.up_proj.weight"
        arrays[bad] = arrays[bad][:16]
        st.save_dict(path, arrays)
        code, err = run_main(cli.main, [d, "-o", os.path.join(self.tmp, "bad.mlb")])
        self.assertEqual(code, 2)
        self.assertIn(f"tensor '{bad}' has shape [16, 64], expected [32, 64]", err)
        self.assertEqual(len(err.strip().splitlines()[-1:]), 1)
        # an expert missing is named too
        del arrays[bad]
        st.save_dict(path, arrays)
        code, err = run_main(cli.main, [d, "-o", os.path.join(self.tmp, "bad.mlb")])
        self.assertEqual(code, 2)
        self.assertIn(f"missing tensors: {bad}", err)

    def test_fused_shape_is_checked(self):
        d = self.gen("qwen3_5_moe", "--text-only")
        path = os.path.join(d, "model.safetensors")
        ck = st.SafetensorsFile(path)
        arrays = {n: ck.get(n) for n in ck.tensors}
        ck.close()
        name = "model.layers.0.mlp.experts.down_proj"
        arrays[name] = arrays[name][:7]
        st.save_dict(path, arrays)
        code, err = run_main(cli.main, [d, "-o", os.path.join(self.tmp, "bad.mlb")])
        self.assertEqual(code, 2)
        self.assertIn(f"tensor '{name}' has shape [7, 128, 32], expected [8, 128, 32]", err)

    def test_close_router_ties_matter(self):
        """The reference with the planted exact tie resolved the other way (expert 1 before
        expert 0) gives other logits: the e2e tests see a wrong tie rule."""
        toks = list(range(3, 40))
        for arch in ("qwen3_moe", "qwen3_5_moe"):
            d = self.gen(arch, "--close-router")
            base = ref_forward.forward(d, toks)
            route = ref_moe.route

            def upper_first(logits, k, normalize):
                top, w = route(logits[:, ::-1], k, normalize)
                return logits.shape[1] - 1 - top, w

            try:
                ref_moe.route = upper_first
                flipped = ref_forward.forward(d, toks)
            finally:
                ref_moe.route = route
            self.assertGreater(np.abs(base - flipped).max(), 1e-3, arch)


if __name__ == "__main__":
    unittest.main()
