#!/usr/bin/env python3
"""Write a Hugging Face tokenizer as a .mlt file: the command line of the converter package's
tokenizer.py (tools/convert/tokenizer.py; `python3 -m convert.tokenizer` in tools/).
"""
from convert.tokenizer import main

if __name__ == "__main__":
    main()
