#!/usr/bin/env bash
# Checks that every C++ source (src, kernels, include, tools, tests, benchmarks) is formatted as
# .clang-format says (clang-format --dry-run -Werror).
#   scripts/lint_cpp.sh          check; exit 1 and list the places when a file would change
#   scripts/lint_cpp.sh --fix    reformat the files in place
# Exit 77 (ctest: skipped) when clang-format is missing or is not version 14 (Debian 12's): other
# versions break some lines differently, so the check would flag formatting that is right.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
if ! command -v clang-format >/dev/null 2>&1; then
  echo "lint_cpp: clang-format not installed (scripts/setup.sh installs it); skipped" >&2
  exit 77
fi
version=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$version" != 14 ]; then
  echo "lint_cpp: clang-format $version is not 14, whose format is the reference; skipped" >&2
  exit 77
fi
mapfile -t files < <(find src kernels include tools tests benchmarks \
  \( -name '*.cpp' -o -name '*.h' \) -type f | sort)
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  echo "lint_cpp: formatted ${#files[@]} files"
  exit 0
fi
if clang-format --dry-run -Werror "${files[@]}"; then
  echo "lint_cpp: ${#files[@]} files formatted as .clang-format says"
else
  echo "lint_cpp: clang-format would change the places above (scripts/lint_cpp.sh --fix)" >&2
  exit 1
fi
