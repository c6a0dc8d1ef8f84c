"""`python3 -m convert …` (in tools/, or with tools/ on PYTHONPATH): tools/convert.py."""

from .cli import main

main()
