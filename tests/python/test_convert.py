"""Unit tests of tools/convert.py and its helpers on gen_random checkpoints: config keys,
tensor table, dtypes and values of the .mlb it writes, the llama2.c path, the converter's
refusals, the tokenizer helpers and the Llama 3 shape. Helpers shared with the other tool tests
come from test_tools.py.

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
import unittest

import numpy as np

from convert import cli
from convert import hf_config
from convert import llama2c
from convert import mlb
from convert import quant
from convert import safetensors_io as st
from convert import tokenizer as ctok
from convert import writer
from convert.families.llama import LLAMA
import gen_common
import gen_llama
import gen_random
import ref_forward
from test_tools import (
    FORMAT_KEYS,
    HAVE_TOK,
    REPO,
    parse_mlb_by_spec,
    read_bytes,
    run_main,
)


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
        return run_main(cli.main, argv)

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
            writer.chat_template_note(
                {"chat_template": "chatml"}, {"tokenizer_config.json": b'{"chat_template": "x"}'}
            ),
        )
        self.assertIn(
            "none recorded (the checkpoint has no chat template and the vocabulary",
            writer.chat_template_note({"chat_template": ""}, {"tokenizer_config.json": b"{}"}),
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
        q_il = (gen_llama.hf_to_interleaved(w, nh) @ x).reshape(nh, hd)
        rot_il = q_il.copy()
        for i in range(hd // 2):
            a, b, th = q_il[:, 2 * i], q_il[:, 2 * i + 1], pos * inv[i]
            rot_il[:, 2 * i], rot_il[:, 2 * i + 1] = a * np.cos(th) - b * np.sin(th), a * np.sin(
                th
            ) + b * np.cos(th)
        np.testing.assert_allclose(rot_il[:, 0::2], rot_hf[:, : hd // 2], atol=1e-12)
        np.testing.assert_allclose(rot_il[:, 1::2], rot_hf[:, hd // 2 :], atol=1e-12)
        np.testing.assert_array_equal(
            llama2c.interleaved_to_hf(gen_llama.hf_to_interleaved(w, nh), nh), w
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
        shape = dict(gen_llama.SHAPES["tiny"], ffn=40, n_layers=1)
        cfg = gen_llama.make_config("llama", shape, 32000, 1, 2, "f32")
        os.makedirs(d)
        with open(os.path.join(d, "config.json"), "w") as f:
            json.dump(cfg, f)
        for f in ctok.TOKENIZER_FILES:
            os.symlink(os.path.join(self.tiny, f), os.path.join(d, f))
        specs = gen_llama.tensor_specs(shape, 32000)
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
            "gemma",
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
        s = gen_llama.SHAPES["llama3-1b"]
        n = ctok.vocab_size(tj)
        cfg = gen_llama.make_config("llama", s, n, 128000, 128001, "bf16")
        self.assertEqual(cfg["rope_scaling"]["rope_type"], "llama3")
        self.assertNotIn("lm_head.weight", gen_llama.tensor_specs(s, n))
        c = LLAMA.normalize_config(cfg, {"eos_token_id": [128001, 128009]}, tj, tc)
        self.assertEqual(
            (c["n_vocab"], c["tie_embeddings"], c["chat_template"], c["eos_ids"]),
            (128256, True, "llama3", [128001, 128009]),
        )
        base, _ = hf_config.compute_rope({"rope_theta": 500000.0}, 64)
        self.assertAlmostEqual(c["rope_freqs"][-1], base[-1] / 32)
