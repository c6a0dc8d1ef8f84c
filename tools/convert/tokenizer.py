"""Write a Hugging Face tokenizer (tokenizer.json + tokenizer_config.json) as a .mlt file.

Usage: tools/convert_tokenizer.py TOKDIR -o OUT.mlt

Also holds the small tokenizer helpers the other tools share (vocabulary size, special ids,
chat-template guess); the C++ tokenizer parses the verbatim JSON itself.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
from typing import Any

from . import mlb

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")


class TokenizerError(Exception):
    pass


def read_tokenizer_files(tok_dir: str) -> dict[str, bytes]:
    """The verbatim bytes of tokenizer.json and tokenizer_config.json ({} config if absent).
    A chat_template.jinja beside them (newer checkpoints, Qwen3.5's among them, keep the
    template there) goes into the config as its chat_template when the config has none."""
    out: dict[str, bytes] = {}
    path = os.path.join(tok_dir, "tokenizer.json")
    if not os.path.isfile(path):
        raise TokenizerError(f"missing {path} (only Hugging Face tokenizer.json is supported)")
    with open(path, "rb") as f:
        out["tokenizer.json"] = f.read()
    cpath = os.path.join(tok_dir, "tokenizer_config.json")
    if os.path.isfile(cpath):
        with open(cpath, "rb") as f:
            out["tokenizer_config.json"] = f.read()
    else:
        out["tokenizer_config.json"] = b"{}"
    jpath = os.path.join(tok_dir, "chat_template.jinja")
    if os.path.isfile(jpath):
        cfg = json.loads(out["tokenizer_config.json"])
        if not cfg.get("chat_template"):
            with open(jpath, encoding="utf-8") as f:
                cfg["chat_template"] = f.read()
            out["tokenizer_config.json"] = json.dumps(cfg, ensure_ascii=False, indent=2).encode()
    return out


def token_ids(tok_json: dict[str, Any]) -> dict[str, int]:
    """Every token string -> id: model vocabulary plus added tokens."""
    vocab = tok_json.get("model", {}).get("vocab", {})
    ids = dict(vocab) if isinstance(vocab, dict) else {v[0]: i for i, v in enumerate(vocab)}
    for a in tok_json.get("added_tokens", []):
        ids[a["content"]] = a["id"]
    return ids


def vocab_size(tok_json: dict[str, Any]) -> int:
    """Full vocabulary size, added tokens included (max id + 1)."""
    return max(token_ids(tok_json).values()) + 1


def _token_str(v: Any) -> str | None:
    if isinstance(v, dict):
        return v.get("content")
    return v if isinstance(v, str) else None


def special_id(tok_json: dict[str, Any], tok_cfg: dict[str, Any], key: str) -> int:
    """Id of tokenizer_config's bos_token / eos_token, or -1."""
    s = _token_str(tok_cfg.get(key))
    return token_ids(tok_json).get(s, -1) if s else -1


# ChatML-family templates (<|im_start|>role\n … <|im_end|>) differ in what they add around
# plain ChatML; each runtime renderer (src/chat) matches one of them exactly.
CHATML_KINDS = (
    # SmolLM3: a metadata system block (knowledge cutoff, today's date, reasoning mode)
    (("Reasoning Mode", "Knowledge Cutoff Date", "/no_think"), "smollm3"),
    (("You are Qwen, created by Alibaba Cloud.",), "qwen"),  # Qwen2.5 default system
    (("You are a helpful AI assistant named SmolLM",), "smollm"),  # SmolLM2 default system
    # Qwen3.5: Qwen3's thinking turns, but XML tool calls (<function=…>) and a generation prompt
    # that opens the think block ('<think>\n' alone; Qwen3 writes it only closed)
    ((("<function=", "reasoning_content", "'<think>\\n'"),), "qwen3.5"),
    (("<think>", "enable_thinking", "reasoning_content"), "qwen3"),  # Qwen3 thinking turns
)
_DEFAULT_SYSTEM = re.compile(r"<\|im_start\|>system(?:\\n|\n)[^'\"{]")


def _chatml_kind(tmpl: str) -> str:
    """Name of the renderer for a template that uses <|im_start|>: the first kind one of whose
    markers (a string, or a tuple of strings that must all be there) the template holds."""

    def has(m: str | tuple[str, ...]) -> bool:
        return all(x in tmpl for x in m) if isinstance(m, tuple) else m in tmpl

    for markers, name in CHATML_KINDS:
        if any(has(m) for m in markers):
            return name
    if _DEFAULT_SYSTEM.search(tmpl):
        return ""  # another built-in system prompt (Qwen2's): no renderer
    return "chatml"


def guess_chat_template(tok_json: dict[str, Any], tok_cfg: dict[str, Any]) -> str:
    """Name of the chat template that suits this vocabulary ("" when unknown). The template text
    decides first (SmolLM3 keeps Llama 3's header tokens in a ChatML vocabulary), then the
    vocabulary."""
    ids = token_ids(tok_json)
    tmpl = tok_cfg.get("chat_template") or ""
    if isinstance(tmpl, list):
        tmpl = " ".join(t.get("template", "") for t in tmpl)
    if "<|im_start|>" in tmpl:
        return _chatml_kind(tmpl)
    if "<|start_header_id|>" in tmpl or (not tmpl and "<|start_header_id|>" in ids):
        # Llama 3.1/3.3's own template (tools, a dated system turn); Llama 3.2's dates it today
        # (strftime_now), which llama3.1 does not, so it stays llama3.
        if "Environment: ipython" in tmpl and "strftime_now" not in tmpl:
            return "llama3.1"
        return "llama3"
    if "<|user|>" in tmpl:
        return "zephyr"
    if "<start_of_turn>" in tmpl:
        return "gemma"
    if "[INST]" in tmpl or (len(ids) == 32000 and "<s>" in ids and "</s>" in ids and "▁" in ids):
        return "llama2"  # the Llama 2 / Mistral 7B SentencePiece vocabulary
    return ""


def write_mlt(tok_dir: str, out: str) -> None:
    files = read_tokenizer_files(tok_dir)
    specs = [mlb.TensorSpec(n, "bytes", (len(files[n]),)) for n in TOKENIZER_FILES]
    source = {"tool": "convert_tokenizer.py", "tokenizer_dir": os.path.abspath(tok_dir)}
    with mlb.MlbWriter(out, "tokenizer", specs, None, source) as w:
        for n in TOKENIZER_FILES:
            w.add(n, files[n])


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="convert_tokenizer.py", description=__doc__.split("\n")[0])
    p.add_argument("tokdir", help="directory with tokenizer.json (and tokenizer_config.json)")
    p.add_argument("-o", "--out", required=True, help="output .mlt file")
    a = p.parse_args(argv)
    try:
        json.loads(read_tokenizer_files(a.tokdir)["tokenizer.json"])
        write_mlt(a.tokdir, a.out)
    except (TokenizerError, OSError, ValueError) as e:
        mlb.die("convert_tokenizer.py", str(e))
    print(f"wrote {a.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
