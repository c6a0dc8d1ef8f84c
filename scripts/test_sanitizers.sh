#!/usr/bin/env bash
# The test suite under AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer:
# the "asan" preset (clang, avx2 kernels, RelWithDebInfo) builds everything with
# -fsanitize=address,undefined -fno-sanitize-recover=undefined, then ctest runs the unit,
# kernel, tokenizer, e2e, server and fuzz-replay tests; any report fails its test. Left out:
# e2e.guard (it runs the build under qemu-x86_64 with an older CPU model, where ASan's runtime
# cannot start), the "long" label, and the release/lint/python labels (no C++ of their own).
# The avx512vnni kernels are checked the same way with KRAFLA_SANITIZE_ISA=avx512vnni.
#
#   scripts/test_sanitizers.sh [CTEST_ARGS…]     # e.g. -R 'unit|Session'
#
# Not in the README's test command: under the sanitizers the suite takes about twice as long.
# CI runs it as its own job (.github/workflows/ci.yml, sanitizers).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh --tests --sanitizers
args=()
[ -n "${KRAFLA_SANITIZE_ISA:-}" ] && args=(-DKRAFLA_ISA="$KRAFLA_SANITIZE_ISA")
cmake --preset asan "${args[@]}" >/dev/null
cmake --build build/asan -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0:strict_string_checks=1:detect_stack_use_after_return=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --preset asan -j"$(nproc)" -LE "long|release|lint|python" -E "^e2e\.guard$" "$@"
