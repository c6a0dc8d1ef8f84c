"""The documentation against the tree and the executables: every relative Markdown link and
every repository path the docs mention (docs/…, scripts/…, tests/…, tools/… files) exists, and
every long option shown with ml_run, ml_bench, ml_tok or ml_server in a code block is one that
executable's --help lists.

    docs_check.py BUILD_DIR SOURCE_DIR
"""

import glob
import os
import re
import subprocess
import sys

BIN, SRC = sys.argv[1], sys.argv[2]
EXES = ("ml_run", "ml_bench", "ml_tok", "ml_server")
PATH = re.compile(
    r"(?<![\w./-])((?:docs|scripts|tests|tools|src|include|kernels|models|cmake|benchmarks|"
    r"\.github|\.ci)/[\w./-]*\w\.(?:md|sh|py|mjs|cpp|h|json|txt|cmake|yml|png|svg|jinja))\b"
)
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Scripts the docs announce before they exist (the workflows run them once they do).
FUTURE = {"scripts/test_windows.sh", "scripts/test_sanitizers.sh"}
SUBCOMMANDS = {"ml_tok": ["encode", "decode", "info"]}


def help_flags(exe: str) -> set[str]:
    found = set()
    for sub in [[]] + [[s] for s in SUBCOMMANDS.get(exe, [])]:
        out = subprocess.run(
            [os.path.join(BIN, exe), *sub, "--help"], capture_output=True, text=True, check=False
        )
        found |= set(re.findall(r"--[a-z][\w-]*", out.stdout + out.stderr))
    return found


def code_blocks(text: str):
    """(first line number, lines) of every fenced code block."""
    lines, block, start = text.split("\n"), None, 0
    for i, line in enumerate(lines, 1):
        if line.lstrip().startswith("```"):
            if block is None:
                block, start = [], i + 1
            else:
                yield start, block
                block = None
        elif block is not None:
            block.append(line)


def main() -> None:
    flags = {e: help_flags(e) for e in EXES}
    docs = [os.path.join(SRC, "README.md"), os.path.join(SRC, "DEVELOPERS.md")]
    docs += sorted(glob.glob(os.path.join(SRC, "docs", "*.md")))
    errors = []
    for doc in docs:
        rel = os.path.relpath(doc, SRC)
        text = open(doc, encoding="utf-8").read()
        for n, line in enumerate(text.split("\n"), 1):
            for target in LINK.findall(line):
                if re.match(r"[a-z]+:|#", target):
                    continue
                path = os.path.normpath(os.path.join(os.path.dirname(doc), target.split("#")[0]))
                if not os.path.exists(path):
                    errors.append(f"{rel}:{n}: link to a missing file: {target}")
            for path in PATH.findall(line):
                if path not in FUTURE and not os.path.exists(os.path.join(SRC, path)):
                    errors.append(f"{rel}:{n}: names a missing file: {path}")
        for start, block in code_blocks(text):
            for k, line in enumerate(block):
                for exe in EXES:
                    # The executable as the command (after VAR=value assignments and a path).
                    m = re.match(
                        rf"\s*(?:\$ )?(?:[A-Z_]+=\S*\s+)*(?:[^\s=]*/)?{exe}(?:\.exe)?\s(.*)", line
                    )
                    if not m:
                        continue
                    args = m.group(1).split("#")[0]
                    for flag in re.findall(r"(?<![\w-])--[a-z][\w-]*", args):
                        if flag not in flags[exe]:
                            errors.append(f"{rel}:{start + k}: {exe} has no option {flag}")
    for e in errors:
        print(f"docs_check: {e}")
    if errors:
        raise SystemExit(f"docs_check: {len(errors)} problems in {len(docs)} files")
    print(f"docs_check: {len(docs)} files: links, paths and options all found")


if __name__ == "__main__":
    main()
