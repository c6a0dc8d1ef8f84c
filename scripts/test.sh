#!/usr/bin/env bash
# The whole test suite: dependencies, then for each ISA preset this CPU runs natively
# (KRAFLA_TEST_PRESETS overrides), build and run ctest (kernels vs scalar vs double
# reference, unit, tokenizer parity, end-to-end logits vs the numpy reference, server). The
# "long" label (the Qwen3.5-0.8B-shaped check) is left to `ctest --preset P -L long`; every
# other ISA level is scripts/test_all_isas.sh.
#   scripts/test.sh           the whole suite, as CI runs it (.ci/run)
#   scripts/test.sh --quick   the inner loop: the best preset only; unit, kernel, C API and
#                             layer tests, and one logits check per family (Q8_0 against the
#                             numpy reference): a few minutes on a built tree
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
quick=0
[ "${1:-}" = "--quick" ] && quick=1
scripts/setup.sh --tests
presets=${KRAFLA_TEST_PRESETS:-$(scripts/detect_isa.sh --all | tr ' ' '\n' | head -n 2 | tr '\n' ' ')}
if [ $quick = 1 ]; then
  p=${presets%% *}
  scripts/build.sh "$p" -DKRAFLA_BUILD_TESTS=ON -DKRAFLA_SHARED=ON >/dev/null
  families="llama|mistral|qwen2|qwen3|smollm3|gemma2|gemma3|qwen35"
  exec ctest --preset "$p" -j "$(nproc)" -R "^(e2e\.setup|e2e\.logits\.($families)\.q8_0|capi\..*|layers\.check)$|^[A-Z]"
fi
# Through ccache when there is one: the presets differ only in their kernel TU, so the second
# one's other objects come from the first one's (clean clone, 2 cores: 22.4 -> 18.6 min).
cache=()
if command -v ccache >/dev/null 2>&1; then
  cache=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$root"
fi
# The tests by name (a missing GoogleTest fails here rather than building none), and the
# shared library for the C API's and the Python module's tests (ctest -L capi).
options=(-DKRAFLA_BUILD_TESTS=ON -DKRAFLA_BUILD_BENCHMARKS=ON -DKRAFLA_SHARED=ON)
status=0
first=1
prev=
for p in $presets; do
  echo "=== preset $p ==="
  if [ $first = 1 ]; then
    scripts/build.sh "$p" "${options[@]}" "${cache[@]}" >/dev/null
  else
    # Only the kernel-dependent tests run again below: ml_server (its tests are the server
    # label's) is left out of this build.
    scripts/build.sh "$p" "${options[@]}" -DKRAFLA_BUILD_SERVER=OFF "${cache[@]}" >/dev/null
  fi
  # The e2e models do not depend on the ISA: a passed preset hands its fixture on (e2e.setup
  # sees its stamp and keeps it instead of generating the models again, ~90 s).
  if [ -n "$prev" ] && [ $status = 0 ] && [ -d "build/$prev/e2e" ] && [ ! -e "build/$p/e2e" ]; then
    mv "build/$prev/e2e" "build/$p/e2e"
  fi
  if [ $first = 1 ]; then
    ctest --preset "$p" -j "$(nproc)" -LE long || status=1
  else
    # The tokenizer, Python-tool, server and release tests and the e2e tests labelled "once"
    # (GGUF import, tools, docs) do not depend on the kernels: run them once.
    ctest --preset "$p" -j "$(nproc)" -LE "tokenizer|python|server|release|long|once" || status=1
  fi
  first=0
  prev=$p
done
# The last preset's e2e fixture (a few GB of random models; ctest writes it again whenever a
# test needs it) goes when everything passed; after a failure it stays for a look.
[ $status = 1 ] || rm -rf "build/$prev/e2e"
exit $status
