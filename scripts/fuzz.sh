#!/usr/bin/env bash
# Runs the libFuzzer targets of tests/fuzz (docs/reliability.md).
#
#   scripts/fuzz.sh [TARGET|all] [SECONDS] [-- LIBFUZZER_OPTIONS…]   # default: all 60
#   scripts/fuzz.sh --runs N [TARGET|all]                              # N executions each instead
#
# Builds the "fuzz" preset (clang; ASan, UBSan and libFuzzer; avx2 kernels) into build/fuzz,
# then fuzzes each target from a working corpus, build/fuzz/corpus/TARGET, seeded from the
# checked-in tests/fuzz/corpus/TARGET (what libFuzzer finds stays there between runs; the
# checked-in seeds change only by tests/fuzz/make_seeds.py). A crash, leak, sanitizer report,
# timeout (10 s per input) or out-of-memory (2 GB) stops that target: its input is written to
# build/fuzz/crashes/TARGET/; copy it to tests/fuzz/regressions/TARGET/ with the fix, and the
# suite replays it from then on (ctest fuzz.replay.TARGET). Prints one row per target: the
# executions, the coverage (edges) and features, the corpus size, and the crashes this run found.
# Exit status: 0 when no target crashed, 1 otherwise, 2 on bad arguments.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2
targets=(model tokenizer_json tokenize chat request json_schema)
usage() { echo "usage: scripts/fuzz.sh [--runs N] [TARGET|all] [SECONDS] [-- OPTIONS…] (targets: ${targets[*]})" >&2; exit 2; }

runs=""
if [ "${1:-}" = "--runs" ]; then runs=${2:-}; shift 2 || usage; [[ "$runs" =~ ^[0-9]+$ ]] || usage; fi
which=${1:-all}; [ $# -gt 0 ] && shift
seconds=60
if [ $# -gt 0 ] && [ "$1" != "--" ]; then seconds=$1; shift; fi
[[ "$seconds" =~ ^[0-9]+$ ]] || usage
[ "${1:-}" = "--" ] && shift
extra=("$@")
if [ "$which" != all ]; then
  [[ " ${targets[*]} " == *" $which "* ]] || { echo "fuzz: no target '$which' (targets: ${targets[*]})" >&2; exit 2; }
  targets=("$which")
fi
command -v clang++ >/dev/null || { echo "fuzz: clang++ is missing: scripts/setup.sh --sanitizers" >&2; exit 2; }
scripts/fetch_tokenizers.sh >/dev/null 2>&1  # the tokenize target reads the real tokenizers

echo "fuzz: building the fuzz preset (build/fuzz)" >&2
cmake --preset fuzz >build/fuzz.configure.log 2>&1 ||
  { tail -20 build/fuzz.configure.log >&2; exit 2; }
cmake --build build/fuzz -j"$(nproc)" --target "${targets[@]/#/fuzz_}" >build/fuzz.build.log 2>&1 ||
  { grep -E "error" build/fuzz.build.log | head -20 >&2; exit 2; }

status=0
printf "%-16s %12s %8s %8s %8s %8s\n" target execs edges features corpus crashes
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t crashes=build/fuzz/crashes/$t log=build/fuzz/fuzz-$t.log
  mkdir -p "$corpus" "$crashes"
  touch "$crashes/.start"  # what this run finds is newer
  cp -n tests/fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null
  limit=(-max_total_time="$seconds")
  [ -n "$runs" ] && limit=(-runs="$runs")
  # ASan's leak check on; UBSan stops at the first report (the build has -fno-sanitize-recover).
  ASAN_OPTIONS=detect_leaks=1:allocator_may_return_null=1 \
    "build/fuzz/tests/fuzz/fuzz_$t" "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
      -artifact_prefix="$crashes/" -print_final_stats=1 "${extra[@]}" "$corpus" >"$log" 2>&1
  rc=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -oE 'cov: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -oE 'ft: [0-9]+' "$log" | tail -1 | cut -d' ' -f2)
  found=$(find "$crashes" -type f -newer "$crashes/.start" | wc -l)
  printf "%-16s %12s %8s %8s %8s %8s\n" "$t" "${execs:-?}" "${cov:-?}" "${ft:-?}" "$(find "$corpus" -type f | wc -l)" "$found"
  if [ $rc -ne 0 ]; then
    status=1
    echo "fuzz: $t stopped (exit $rc); log $log, inputs in $crashes:" >&2
    grep -m3 -E "ERROR|runtime error|SUMMARY|deadly signal|timeout" "$log" >&2
  fi
done
exit $status
