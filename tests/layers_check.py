#!/usr/bin/python3
"""The shape of src/ (docs/architecture.md, "Layers"), checked on the tree:

1. Layers: each folder of src/ includes only itself, the folders below it and the public
   headers (include/krafla/) and kernels/kernels.h — so there is no include cycle among them.
2. Families: outside src/families/, no quoted architecture name of a registered family
   ("llama", "qwen35", ...) in src/ or include/, except in the chat templates and the
   tokenizer, whose own names (template names, pre-tokenizers) share some spellings.
3. The public boundary: tools/ include only include/krafla/ headers and their own files.

    tests/layers_check.py SOURCE_DIR
"""

from __future__ import annotations

import glob
import os
import re
import sys

# Bottom to top; a folder may include those before it in this list.
LAYERS = [
    ["base"],
    ["io"],
    ["tokenizer", "chat"],
    ["families"],
    ["state"],
    ["ops"],
    ["model"],
    ["runtime"],
    ["constrain"],
    ["api"],
]
# Names that chat templates and pre-tokenizers use for themselves.
NAME_EXEMPT = ("src/chat/", "src/tokenizer/", "src/families/")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def rank(folder: str) -> int:
    for i, layer in enumerate(LAYERS):
        if folder in layer:
            return i
    return -1


def check_layers(src: str) -> list[str]:
    errors = []
    folders = sorted(d for d in os.listdir(os.path.join(src, "src")) if not d.startswith("."))
    for folder in folders:
        if rank(folder) < 0:
            errors.append(f"src/{folder}/ is in no layer of tests/layers_check.py")
            continue
        for path in sorted(glob.glob(os.path.join(src, "src", folder, "*.*"))):
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for inc in INCLUDE.findall(text):
                top = inc.split("/")[0]
                if inc.startswith("krafla/") or inc == "kernels/kernels.h" or "/" not in inc:
                    continue
                r = rank(top)
                if r < 0 or r > rank(folder) or (r == rank(folder) and top != folder):
                    rel = os.path.relpath(path, src)
                    errors.append(f"{rel} includes {inc}: src/{top}/ is not below src/{folder}/")
    return errors


def family_names(src: str) -> set[str]:
    names = set()
    for path in glob.glob(os.path.join(src, "src", "families", "*.cpp")):
        with open(path, encoding="utf-8") as f:
            names |= set(re.findall(r'\.(?:gguf_)?arch\s*=\s*"([^"]+)"', f.read()))
    return names


def check_names(src: str) -> list[str]:
    names = family_names(src)
    if len(names) < 8:
        return [f"found only {sorted(names)} as family names in src/families/*.cpp"]
    quoted = re.compile(r'"(' + "|".join(map(re.escape, sorted(names))) + r')"')
    errors = []
    files = glob.glob(os.path.join(src, "src", "**", "*.*"), recursive=True)
    files += glob.glob(os.path.join(src, "include", "**", "*.h"), recursive=True)
    for path in sorted(files):
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        if rel.startswith(NAME_EXEMPT):
            continue
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                m = quoted.search(line)
                if m:
                    errors.append(
                        f"{rel}:{n}: architecture name {m.group(0)} outside src/families/"
                    )
    return errors


def check_tools(src: str) -> list[str]:
    errors = []
    own = {
        os.path.relpath(p, os.path.join(src, "tools"))
        for p in glob.glob(os.path.join(src, "tools", "**", "*.h"), recursive=True)
    }
    own |= {os.path.basename(p) for p in own}
    for path in sorted(glob.glob(os.path.join(src, "tools", "**", "*.[ch]*"), recursive=True)):
        with open(path, encoding="utf-8") as f:
            for inc in INCLUDE.findall(f.read()):
                if inc.startswith("krafla/") or inc in own or inc == "krafla_commit.h":
                    continue
                errors.append(
                    f'{os.path.relpath(path, src)} includes "{inc}": tools use the '
                    "public headers (include/krafla/) only"
                )
    return errors


def main() -> None:
    src = sys.argv[1]
    errors = check_layers(src) + check_names(src) + check_tools(src)
    for e in errors:
        print(e)
    if errors:
        sys.exit(f"{len(errors)} problem(s)")
    print(f"layers, family names and the public boundary hold ({len(family_names(src))} names)")


if __name__ == "__main__":
    main()
