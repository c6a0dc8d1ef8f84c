#!/usr/bin/env bash
# A/B benchmark of two commits: builds ml_bench of each (a detached git worktree per commit
# under build/ab/, the same ISA preset, reused on later runs) and runs scripts/bench.py --base
# with them alternated per round, printing each configuration's speed and the ratio new/base
# with its spread over the rounds (docs/benchmarks.md).
#
#   scripts/bench_ab.sh BASE NEW [bench.py options…]   # e.g. HEAD~1 HEAD -m m.mlb -t 1,2
#
# NEW may be "." for the working tree as it is (uncommitted changes included). KRAFLA_PRESET
# picks the preset (default: the best this CPU runs).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 2 ] || { echo "usage: scripts/bench_ab.sh BASE NEW [bench.py options…]" >&2; exit 2; }
base=$1 new=$2
shift 2
preset=${KRAFLA_PRESET:-$(scripts/detect_isa.sh)}

# The ml_bench of REV, built in its own worktree; prints its path.
build_rev() {
  local src
  if [ "$1" = . ]; then
    src=$root
  else
    local sha
    sha=$(git rev-parse --verify --quiet "$1^{commit}") ||
      { echo "bench_ab: '$1' is not a commit" >&2; exit 2; }
    src=$root/build/ab/${sha:0:12}
    [ -d "$src" ] || git worktree add --detach --quiet "$src" "$sha"
  fi
  echo "bench_ab: building $1 ($preset) in $src/build/$preset" >&2
  (cd "$src" && cmake --preset "$preset" -DKRAFLA_BUILD_SERVER=OFF >/dev/null &&
    cmake --build "build/$preset" -j "$(nproc)" --target ml_bench >/dev/null) ||
    { echo "bench_ab: the build of $1 failed" >&2; exit 1; }
  echo "$src/build/$preset/ml_bench"
}

base_bin=$(build_rev "$base")
new_bin=$(build_rev "$new")
exec /usr/bin/python3 scripts/bench.py --base "$base=$base_bin" --ml-bench "$new=$new_bin" "$@"
