#!/usr/bin/env bash
# The whole test suite: dependencies, then for each ISA preset this CPU runs natively
# (KRAFLA_TEST_PRESETS overrides), build and run ctest (kernels vs scalar vs double
# reference, unit, tokenizer parity, end-to-end logits vs the numpy reference, server).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh --tests
presets=${KRAFLA_TEST_PRESETS:-$(scripts/detect_isa.sh --all | tr ' ' '\n' | head -n 2 | tr '\n' ' ')}
status=0
for p in $presets; do
  echo "=== preset $p ==="
  scripts/build.sh "$p" >/dev/null
  ctest --preset "$p" -j "$(nproc)" || status=1
done
exit $status
