#!/usr/bin/env bash
# Checks the format (black --check) and lint (flake8) of the Python sources: tools/, tests/ and
# scripts/*.py, with the settings in pyproject.toml (black) and .flake8 (flake8).
#   scripts/lint_python.sh          check; exit 1 when either finds something
#   scripts/lint_python.sh --fix    reformat with black first, then lint
# Exit 77 (ctest: skipped) when black or flake8 is not installed (scripts/setup.sh installs both,
# Debian's black and flake8).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
missing=()
for t in black flake8; do
  command -v "$t" >/dev/null 2>&1 || missing+=("$t")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "lint_python: ${missing[*]} not installed (scripts/setup.sh installs it); skipped" >&2
  exit 77
fi
paths=(tools tests python scripts/*.py)
status=0
if [ "${1:-}" = "--fix" ]; then
  black -q "${paths[@]}"
else
  black --check "${paths[@]}" || { echo "lint_python: black would reformat the files above" \
    "(scripts/lint_python.sh --fix)" >&2; status=1; }
fi
flake8 "${paths[@]}" || status=1
[ $status -eq 0 ] && echo "lint_python: black and flake8 clean"
exit $status
