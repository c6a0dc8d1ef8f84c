#!/usr/bin/env bash
# Prints the best ISA preset this CPU runs that has kernels in this checkout.
# With --all: every implemented preset this CPU runs natively, best first.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
flags=" $(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cut -d: -f2) "
has() { for f in "$@"; do [[ "$flags" == *" $f "* ]] || return 1; done; }
cands=()
case "$(uname -m)" in
  x86_64)
    has avx512f avx512bw avx512vl avx512dq avx512_vnni avx2 fma f16c && cands+=(avx512vnni)
    has avx_vnni avx2 fma f16c && cands+=(avxvnni)
    has avx2 fma f16c && cands+=(avx2)
    has sse4_1 ssse3 && cands+=(sse41)
    cands+=(sse2) ;;
  aarch64)
    has sve && cands+=(sve)
    has i8mm asimddp && cands+=(i8mm)
    has asimddp && cands+=(dotprod)
    cands+=(neon) ;;
  armv7l) has neon vfpv4 && cands+=(neon32) ;;
esac
cands+=(scalar)
out=()
for c in "${cands[@]}"; do [ -f "$root/kernels/$c.cpp" ] && out+=("$c"); done
if [ "${1:-}" = "--all" ]; then echo "${out[@]}"; else echo "${out[0]}"; fi
