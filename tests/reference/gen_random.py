#!/usr/bin/env python3
"""Generate a random-weight Hugging Face checkpoint: the generator of --arch's family.

Usage: PYTHONPATH=tools tests/reference/gen_random.py --arch ARCH [its options] -o DIR
  --arch llama|mistral|qwen2|qwen3|smollm3|smollm2   gen_llama.py (--shape SHAPE, --rope, …)
  --arch gemma2|gemma3|gemma3-vl                     gen_gemma.py
  --arch qwen3.5                                     gen_qwen35.py
  --arch qwen3_moe|qwen3_5_moe                       gen_moe.py (--experts, --close-router)
  --arch gemma4                                      gen_gemma4.py (--shape, --layout)
Each generator (tests/reference/gen_<arch>.py) documents its options; gen_common.py holds what
they share. The converter package (tools/convert, on PYTHONPATH) writes the safetensors and
reads the tokenizer files.
"""
from __future__ import annotations

import argparse
import sys

import gen_gemma
import gen_gemma4
import gen_llama
import gen_moe
import gen_qwen35


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    pre = argparse.ArgumentParser(add_help=False)
    pre.add_argument("--arch")
    arch = pre.parse_known_args(argv)[0].arch
    if arch in gen_gemma4.ARCHES:
        return gen_gemma4.main(argv)
    if arch in gen_gemma.ARCHES:
        return gen_gemma.main(argv)
    if arch == "qwen3.5":
        return gen_qwen35.main(argv)
    if arch in gen_moe.ARCHES:
        return gen_moe.main(argv)
    return gen_llama.main(argv)


if __name__ == "__main__":
    main()
