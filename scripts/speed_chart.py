#!/usr/bin/env python3
"""Draws docs/speed.svg, Krafla's speed against llama.cpp, from the table of
docs/benchmarks.md's section "Results on a quiet machine": for each row (model, quant, ISA,
threads) a pair of bars, prefill and decode, as the ratio Krafla / llama.cpp (1 = as fast).

    scripts/speed_chart.py [--check]   # --check: exit 1 when docs/speed.svg is not up to date

Standard library only: the SVG is written as text.
"""

import argparse
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, "docs", "benchmarks.md")
OUT = os.path.join(ROOT, "docs", "speed.svg")
SECTION = "## Results on a quiet machine"


def rows() -> list[dict]:
    """The section's table rows: label, prefill and decode ratios."""
    text = open(DOC, encoding="utf-8").read()
    start = text.index(SECTION)
    # the section's own table: up to its first subsection
    end = min(i for i in (text.find("\n## ", start + 1), text.find("\n### ", start + 1)) if i > 0)
    out = []
    for line in text[start:end].split("\n"):
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 11 or not re.fullmatch(r"[0-9.]+×", cells[7]):
            continue
        model = cells[0].split(" [")[0]
        out.append(
            {
                "label": f"{model} {cells[2]} -t {cells[4]}",
                "pp": float(cells[7].rstrip("×")),
                "tg": float(cells[10].rstrip("×")),
            }
        )
    if not out:
        raise SystemExit(f"speed_chart: no result rows under '{SECTION}' in {DOC}")
    return out


def svg(data: list[dict]) -> str:
    bar, gap, left, top, width = 12, 14, 210, 50, 420
    top_ratio = max(max(r["pp"], r["tg"]) for r in data)
    scale = width / (int(top_ratio) + 1)
    height = top + len(data) * (2 * bar + gap) + 40
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 60}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        f'<text x="{left}" y="20" font-size="14" font-weight="bold">Krafla / llama.cpp speed '
        "(same weights, same machine)</text>",
        f'<rect x="{left}" y="28" width="12" height="10" fill="#3b6ea8"/>'
        f'<text x="{left + 16}" y="37">prefill (pp128)</text>'
        f'<rect x="{left + 130}" y="28" width="12" height="10" fill="#e07b39"/>'
        f'<text x="{left + 146}" y="37">decode (tg64)</text>',
    ]
    for k in range(int(top_ratio) + 2):
        x = left + k * scale
        dash = "" if k == 1 else ' stroke-dasharray="2,3"'
        parts.append(
            f'<line x1="{x:.1f}" y1="{top - 4}" x2="{x:.1f}" y2="{height - 30}" '
            f'stroke="#999"{dash}/>'
        )
        parts.append(f'<text x="{x:.1f}" y="{height - 16}" text-anchor="middle">{k}×</text>')
    for i, r in enumerate(data):
        y = top + i * (2 * bar + gap)
        parts.append(
            f'<text x="{left - 8}" y="{y + bar + 4}" text-anchor="end">{r["label"]}</text>'
        )
        for j, (key, color) in enumerate((("pp", "#3b6ea8"), ("tg", "#e07b39"))):
            w = r[key] * scale
            yy = y + j * bar
            parts.append(
                f'<rect x="{left}" y="{yy}" width="{w:.1f}" height="{bar - 1}" fill="{color}"/>'
            )
            parts.append(f'<text x="{left + w + 4:.1f}" y="{yy + bar - 2}">{r[key]:.2f}×</text>')
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="fail when docs/speed.svg is stale")
    a = ap.parse_args()
    text = svg(rows())
    if a.check:
        current = open(OUT, encoding="utf-8").read() if os.path.exists(OUT) else ""
        if current != text:
            sys.exit("speed_chart: docs/speed.svg is stale: run scripts/speed_chart.py")
        print("speed_chart: docs/speed.svg is up to date")
        return
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    print(f"speed_chart: wrote {OUT}")


if __name__ == "__main__":
    main()
