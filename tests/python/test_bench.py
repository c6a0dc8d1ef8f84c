"""scripts/bench.py's A/B mode (--base) against fake ml_bench programs whose speeds are known:
the table's medians and per-round ratios are what those speeds give, the two programs
alternate ABBA, and the arguments that make no sense together are refused.

Run: ctest -L python, or with PYTHONPATH=tools:tests/reference:tests/e2e:scripts
     /usr/bin/python3 -m unittest discover -s tests/python -p 'test_*.py'
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import stat
import struct
import tempfile
import unittest

import bench

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))

# A stand-in for ml_bench -o json: prefill (-n 0) and decode speeds taken from its name's
# numbers; each call appends its name to LOG so the order of the calls can be checked. The
# n-th call of a program returns speed * (1 + n/100), so rounds differ and the ratio of two
# programs called alternately varies from round to round.
FAKE = """#!/usr/bin/env python3
import json, os, sys
name = os.path.basename(__file__)
_, pp, tg = name.split("_")
log = os.environ["LOG"]
calls = sum(1 for line in open(log) if line.strip() == name) if os.path.exists(log) else 0
with open(log, "a") as f:
    f.write(name + "\\n")
decode = sys.argv[sys.argv.index("-n") + 1] != "0"
speed = (float(tg) if decode else float(pp)) * (1 + calls / 100)
print(json.dumps([{"samples_ts": [speed, speed], "isa": "fake"}]))
"""


class BenchAB(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        d = self.dir.name
        self.log = os.path.join(d, "calls.log")
        os.environ["LOG"] = self.log
        self.base = self.fake("base_100_10")
        self.new = self.fake("new_150_12")
        self.model = os.path.join(d, "m.mlb")  # what bench.py reads of one: its header
        meta = {
            "format": "krafla-mlb",
            "kind": "model",
            "tensors": [
                {"name": "blk.0.w", "dtype": "q8_0", "shape": [1, 32], "offset": 0, "size": 34}
            ],
        }
        blob = json.dumps(meta).encode()
        with open(self.model, "wb") as f:
            f.write(b"KRAFLAMB" + struct.pack("<IIQ", 1, 0, len(blob)) + blob)

    def tearDown(self):
        self.dir.cleanup()

    def fake(self, name: str) -> str:
        path = os.path.join(self.dir.name, name)
        with open(path, "w") as f:
            f.write(FAKE)
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
        return path

    def run_bench(self, *args: str) -> str:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
            bench.main(list(args))
        return out.getvalue()

    def test_ratios_per_round_and_abba_order(self):
        js = os.path.join(self.dir.name, "ab.json")
        args = ["--base", f"old={self.base}", "--ml-bench", f"new={self.new}", "-m", self.model]
        out = self.run_bench(*args, "-p", "8", "-n", "4", "--rounds", "2", "--json-out", js)
        with open(self.log) as f:
            calls = [line.split("_")[0] for line in f.read().split()]
        # per round: new then base, then base then new (each program: prefill, then decode)
        one = ["new", "new", "base", "base"]
        self.assertEqual(calls, one + one[::-1])
        # round r's n-th calls: new prefill 150*(1+2r/100), base 100*(1+2r/100): ratio 1.5 in
        # every round; decode 12 vs 10 the same way: 1.2
        with open(js) as f:
            row = json.load(f)["results"][0]
        for key, want in (("prefill_tok_s", 1.5), ("decode_tok_s", 1.2)):
            ratios = bench.round_ratios(row, key)
            self.assertEqual(len(ratios), 2)
            for r in ratios:
                self.assertAlmostEqual(r, want, places=9)
        self.assertIn("| pp new/base |", out.splitlines()[4])
        self.assertIn("1.500× (1.500–1.500)", out)
        self.assertIn("1.200× (1.200–1.200)", out)
        # medians over rounds: base prefill 100 * (1.00, 1.02) -> 101.00, new 150 * ... -> 151.50
        self.assertIn("| 101.00 | 151.50 |", out)
        # the saved run prints the same table
        again = self.run_bench("--from-json", js)
        self.assertEqual(again.splitlines()[2:], out.splitlines()[2:])

    def test_refuses_base_with_llama_bench(self):
        with contextlib.redirect_stderr(io.StringIO()) as err, self.assertRaises(SystemExit) as e:
            bench.main(
                [
                    "--base",
                    self.base,
                    "--ml-bench",
                    self.new,
                    "-m",
                    self.model,
                    "--llama-bench",
                    self.base,
                ]
            )
        self.assertEqual(e.exception.code, 2)
        self.assertIn("--base compares two Krafla builds", err.getvalue())


class ThreadCounts(unittest.TestCase):
    """-t takes lists, ranges and "all" (the thread-scaling curve)."""

    def test_lists_ranges_and_all(self):
        self.assertEqual(bench.int_list("1,2"), [1, 2])
        self.assertEqual(bench.int_list("1-4"), [1, 2, 3, 4])
        self.assertEqual(bench.int_list("1,2,4-6,2"), [1, 2, 4, 5, 6])
        self.assertEqual(bench.int_list("all"), list(range(1, (os.cpu_count() or 1) + 1)))

    def test_refuses_bad_counts(self):
        import argparse

        for bad in ("", "0", "x", "3-1", "1-a", "-2"):
            with self.assertRaises(argparse.ArgumentTypeError, msg=bad):
                bench.int_list(bad)


if __name__ == "__main__":
    unittest.main()
