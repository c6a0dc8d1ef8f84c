#!/usr/bin/env bash
# Prints the Wine loader that runs Windows .exe files: wine64 or wine on PATH, else Debian's
# /usr/lib/wine/wine64 (the wine64 package alone puts no link on PATH). Exit 1 when there is
# none. Used by scripts/test_windows.sh and scripts/package.sh.
for w in "$(command -v wine64)" "$(command -v wine)" /usr/lib/wine/wine64; do
  if [ -n "$w" ] && [ -x "$w" ]; then
    echo "$w"
    exit 0
  fi
done
exit 1
