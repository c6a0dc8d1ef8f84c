"""Krafla's converter: Hugging Face (and llama2.c) checkpoints to .mlb, .mlb to GGUF (numpy only).

  cli.py             the command line of tools/convert.py (and `python3 -m convert` in tools/)
  hf.py, llama2c.py  the two kinds of input; writer.py streams the planned tensors to the .mlb
  families/          one module per architecture family (base.py: the Family class they share;
                     __init__.py: the registry, family_for)
  hf_config.py       what the families share: config fields, attention shape, RoPE frequencies
  safetensors_io.py  safetensors read (and written, for tests) directly
  quant.py           the block quantizers; mlb.py, gguf.py the two containers
  tokenizer.py       tokenizer files, special ids, the chat-template guess; .mlt files
                     (tools/convert_tokenizer.py)
  to_gguf.py         a .mlb written as GGUF (tools/to_gguf.py)
  imatrix.py         ml_run --imatrix files, read for convert.py --imatrix

The modules import each other relatively; importing the package imports none of them. Run the
commands through tools/*.py or `python3 -m convert[.MODULE]` with tools/ as the current
directory or on PYTHONPATH.
"""
