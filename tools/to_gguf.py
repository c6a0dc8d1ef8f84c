#!/usr/bin/env python3
"""Write a .mlb model (or a tokenizer) as a GGUF file: the command line of the converter
package's to_gguf.py (tools/convert/to_gguf.py; `python3 -m convert.to_gguf` in tools/).
"""
from convert.to_gguf import main

if __name__ == "__main__":
    main()
