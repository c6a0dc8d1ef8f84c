"""python/krafla (ctypes over libkrafla.so) on the e2e models: logits against the numpy
reference, tokenization round trips, greedy generation against ml_run's, chat rendering and the
errors a script meets. Run by ctest (capi.python) with PYTHONPATH, KRAFLA_LIBRARY, KRAFLA_E2E."""

from __future__ import annotations

import os
import subprocess
import unittest

import numpy as np

import krafla
from e2e_common import LIMITS, SRC, mlb, prompt_ids

WORK = os.environ.get("KRAFLA_E2E", "")
BIN = os.path.dirname(WORK)


def compare(ref: np.ndarray, got: np.ndarray, limits: list[str], tmp: str) -> str:
    """tests/e2e/compare.py on the two arrays, with the e2e limits."""
    a, b = os.path.join(tmp, "ref.npy"), os.path.join(tmp, "got.npy")
    np.save(a, ref)
    np.save(b, got)
    r = subprocess.run(
        ["/usr/bin/python3", os.path.join(SRC, "tests", "e2e", "compare.py"), a, b] + limits,
        capture_output=True,
        text=True,
    )
    if r.returncode != 0:
        raise AssertionError(r.stdout + r.stderr)
    return r.stdout.strip()


class ModuleTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.model = krafla.Model(mlb(WORK, "llama", "q8_0"), threads=2)

    def test_version(self):
        self.assertRegex(krafla.version(), r"^\d+\.\d+\.\d+$")
        self.assertTrue(krafla.isa())

    def test_logits_against_the_numpy_reference(self):
        ids = prompt_ids(WORK, "llama")
        s = self.model.session()
        rows = []
        for t in ids:  # one token per eval: the decode path
            s.eval([t])
            rows.append(s.logits())
        self.assertEqual(s.n_past, len(ids))
        ref = np.load(os.path.join(WORK, "llama-ref.npy"))
        tmp = os.path.join(BIN, "capi-python")
        os.makedirs(tmp, exist_ok=True)
        print(compare(ref, np.array(rows, dtype=np.float32), LIMITS["q8_0"], tmp))

    def test_tokenize_round_trip(self):
        for text in ["The jury said it did find", "naïve café — 東京 🚀", " leading space", ""]:
            ids = self.model.tokenize(text, add_special=False)
            self.assertEqual(self.model.detokenize(ids), text)

    def test_generate_matches_ml_run(self):
        """Greedy generation: the pieces joined equal ml_run's text for the same prompt."""
        prompt = "The jury said"
        got = "".join(self.model.generate(prompt, max_tokens=24, temperature=0))
        r = subprocess.run(
            [
                os.path.join(BIN, "ml_run"),
                "-m",
                mlb(WORK, "llama", "q8_0"),
                "-p",
                prompt,
                "-n",
                "24",
                "--temp",
                "0",
                "-q",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        self.assertTrue(got)
        self.assertEqual(r.stdout, prompt + got + "\n")  # ml_run ends with a newline

    def test_seeded_sampling_repeats(self):
        a = list(self.model.generate("The jury", max_tokens=16, seed=5))
        b = list(self.model.generate("The jury", max_tokens=16, seed=5))
        self.assertEqual(a, b)

    def test_chat(self):
        msgs = [{"role": "user", "content": "Hi"}]
        self.assertEqual(
            self.model.apply_chat(msgs, "chatml"),
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        )
        reply = self.model.chat(msgs, "chatml", max_tokens=8, temperature=0)
        self.assertIsInstance(reply, str)

    def test_errors(self):
        with self.assertRaisesRegex(krafla.Error, "nonexistent"):
            krafla.Model("/nonexistent.gguf")
        s = self.model.session(n_ctx=4)
        with self.assertRaisesRegex(krafla.Error, "vocabulary"):
            s.eval([1, self.model.n_vocab + 3])
        self.assertEqual(s.n_past, 0)
        with self.assertRaises(krafla.Error):
            s.eval([1, 2, 3, 4, 5])  # past the context
        with self.assertRaisesRegex(krafla.Error, "top_p"):
            next(self.model.generate("x", top_p=float("nan")))
        with self.assertRaisesRegex(krafla.Error, "no-such"):
            self.model.apply_chat([{"role": "user", "content": "x"}], "no-such")


if __name__ == "__main__":
    unittest.main()
