#!/usr/bin/env bash
# Builds every ISA preset and runs its tests natively or under qemu-user, then prints a table
# ISA × (build, kernel tests, e2e logits, CPU guard).
#
#   scripts/test_all_isas.sh [--quick] [PRESET ...]     (default: all presets)
#
# How each preset runs (CMakePresets.json): the x86 presets this CPU has run natively; sse2 and
# sse41 run their tests under qemu-x86_64 with a CPU of their generation (Opteron_G1, Nehalem:
# proof that nothing newer sneaks in); the Arm presets are cross-compiled with Debian's
# g++-aarch64-linux-gnu / g++-arm-linux-gnueabihf and run under qemu-aarch64 / qemu-arm. A preset
# whose ISA this CPU lacks and that has no emulator is reported "skip (CPU)".
# The e2e logits column runs the llama and qwen35 models (f32, q8_0, q4_0 against the numpy
# reference); --quick runs qwen35 only. Logs: build/<preset>/test_all_isas.*.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

quick=0
if [ "${1:-}" = "--quick" ]; then quick=1; shift; fi
all=(scalar sse2 sse41 avx2 avxvnni avx512vnni neon32 neon dotprod i8mm sve)
presets=("$@")
[ ${#presets[@]} -eq 0 ] && presets=("${all[@]}")
native=" $(scripts/detect_isa.sh --all) "
models=llama,qwen35
[ $quick = 1 ] && models=qwen35
jobs=${KRAFLA_JOBS:-$(nproc)}

declare -A res_build res_kern res_e2e res_guard
status=0
mark() { [ "$1" = 0 ] && echo pass || { status=1; echo FAIL; }; }

for p in "${presets[@]}"; do
  dir=build/$p
  emulated=0
  case $p in sse2|sse41|neon32|neon|dotprod|i8mm|sve) emulated=1 ;; esac
  if [ $emulated = 0 ] && [[ "$native" != *" $p "* ]]; then
    res_build[$p]="skip (CPU)"; res_kern[$p]=-; res_e2e[$p]=-; res_guard[$p]=-
    continue
  fi
  echo "=== $p: build" >&2
  mkdir -p "$dir"
  if cmake --preset "$p" >"$dir/test_all_isas.configure.log" 2>&1 &&
     cmake --build --preset "$p" -j "$jobs" >"$dir/test_all_isas.build.log" 2>&1; then
    res_build[$p]=pass
  else
    res_build[$p]=FAIL; status=1; res_kern[$p]=-; res_e2e[$p]=-; res_guard[$p]=-
    echo "    see $dir/test_all_isas.*.log" >&2
    continue
  fi
  echo "=== $p: kernel tests" >&2
  ctest --preset "$p" -L kernels -j "$jobs" >"$dir/test_all_isas.kernels.log" 2>&1
  res_kern[$p]=$(mark $?)
  echo "=== $p: e2e logits ($models)" >&2
  KRAFLA_E2E_MODELS=$models ctest --preset "$p" -j "$jobs" \
    -R "^e2e\.(setup|logits\.($(echo $models | tr , '|'))\.)" >"$dir/test_all_isas.e2e.log" 2>&1
  res_e2e[$p]=$(mark $?)
  echo "=== $p: CPU guard" >&2
  if ctest --preset "$p" -N -R "^e2e\.guard" | grep -q "Total Tests: 0"; then
    res_guard[$p]="n/a"
  else
    ctest --preset "$p" -R "^e2e\.guard" >"$dir/test_all_isas.guard.log" 2>&1
    res_guard[$p]=$(mark $?)
  fi
done

printf '\n| ISA | build | kernel tests | e2e logits (%s) | CPU guard |\n|---|---|---|---|---|\n' "$models"
for p in "${presets[@]}"; do
  printf '| %s | %s | %s | %s | %s |\n' "$p" "${res_build[$p]}" "${res_kern[$p]}" "${res_e2e[$p]}" "${res_guard[$p]}"
done
exit $status
