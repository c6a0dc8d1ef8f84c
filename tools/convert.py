#!/usr/bin/env python3
"""Convert a Hugging Face checkpoint (or a llama2.c one) to .mlb: the command line of the
converter package next to this script (tools/convert/, cli.py; `python3 -m convert` in tools/
is the same). Run it as a script: Python puts this script's folder on the import path, which
is how `convert` below is found.
"""
from convert.cli import main

if __name__ == "__main__":
    main()
