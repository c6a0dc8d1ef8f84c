#!/usr/bin/env bash
# The whole test suite: dependencies, then for each ISA preset this CPU runs natively
# (KRAFLA_TEST_PRESETS overrides), build and run ctest (kernels vs scalar vs double
# reference, unit, tokenizer parity, end-to-end logits vs the numpy reference, server). The
# "long" label (the Qwen3.5-0.8B-shaped check) is left to `ctest --preset P -L long`; every
# other ISA level is scripts/test_all_isas.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh --tests
presets=${KRAFLA_TEST_PRESETS:-$(scripts/detect_isa.sh --all | tr ' ' '\n' | head -n 2 | tr '\n' ' ')}
status=0
first=1
for p in $presets; do
  echo "=== preset $p ==="
  scripts/build.sh "$p" >/dev/null
  if [ $first = 1 ]; then
    ctest --preset "$p" -j "$(nproc)" -LE long || status=1
  else
    # The tokenizer, Python-tool, server and release tests and the e2e tests labelled "once"
    # (GGUF import, tools, docs) do not depend on the kernels: run them once.
    ctest --preset "$p" -j "$(nproc)" -LE "tokenizer|python|server|release|long|once" || status=1
  fi
  # A passed preset's e2e fixture (a few GB of random models; ctest writes it again whenever
  # a test needs it) goes, so the run holds one preset's at a time; a failed one stays.
  [ $status = 1 ] || rm -rf "build/$p/e2e"
  first=0
done
exit $status
