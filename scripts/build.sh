#!/usr/bin/env bash
# Configures and builds one ISA preset (default: the best this CPU runs): build/<preset>/.
# Arguments after the preset go to the configure step (e.g. -DKRAFLA_BUILD_SERVER=OFF);
# KRAFLA_TARGETS="ml_run ..." builds only those targets (default: all).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
preset=${1:-$(scripts/detect_isa.sh)}
shift $(($# > 0 ? 1 : 0))
jobs=${KRAFLA_JOBS:-$(nproc)}
cmake --preset "$preset" "$@" >/dev/null
targets=()
for t in ${KRAFLA_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build --preset "$preset" -j "$jobs" "${targets[@]}"
echo "$root/build/$preset"
