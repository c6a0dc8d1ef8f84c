#!/usr/bin/env bash
# Builds the Windows x86-64 presets (MinGW-w64 cross compiler) and runs their executables under
# Wine against the native Linux build of the same ISA: the text must be byte for byte the same.
#
#   scripts/test_windows.sh [--kernel-tests] [ISA ...]   (default: scalar sse2 avx2 avx512vnni)
#
# For each ISA: builds windows-<isa> (ml_run ml_bench ml_tok ml_server) and the native preset
# <isa> (ml_run ml_tok ml_server), then checks
#   guard   ml_run --version: the same exit code under Wine as natively (0, or 3 with the same
#           missing feature on a CPU without the ISA; then the other checks are skipped)
#   run     ml_run -p "The jury said" -n 24 -s 7 -t 2: identical stdout; then again with
#           --pack-cache (written, then mapped): identical again
#   tok     ml_tok encode (ASCII and non-ASCII text, from argv and from stdin) and decode
#   bench   ml_bench -p 32 -n 8 -t 2 exits 0 with its pp32 and tg8 rows
#   server  ml_server.exe answers /health and a greedy /v1/completions with the native server's
#           text, then stops cleanly on SIGINT (Wine turns it into a console Ctrl-C event)
# Then, if this CPU lacks an x86 level (avxvnni, avx512vnni, avx2 or sse41), a Windows ml_run
# built for it must exit 3 naming the missing feature (build/windows-guard-<isa>).
# --kernel-tests also builds kernel_tests for windows-<isa> and runs it under Wine.
# The model is $KRAFLA_WINDOWS_MODEL, default .models/quality/q8_0.mlb (scripts/quality_table.py
# writes it), else the trained model converted to build/windows-model-q8_0.mlb (the same
# weights); any .mlb works. Exit status: 0 when every check passed.
# Logs: build/windows-<isa>/test_windows.*.log.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 2

kernel_tests=0
if [ "${1:-}" = "--kernel-tests" ]; then kernel_tests=1; shift; fi
isas=("$@")
[ ${#isas[@]} -eq 0 ] && isas=(scalar sse2 avx2 avx512vnni)
jobs=${KRAFLA_JOBS:-2}
model=$(realpath "${KRAFLA_WINDOWS_MODEL:-.models/quality/q8_0.mlb}" 2>/dev/null || true)
if [ ! -f "$model" ] && [ -z "${KRAFLA_WINDOWS_MODEL:-}" ]; then  # the trained model, converted
  model=$root/build/windows-model-q8_0.mlb
  mkdir -p "$root/build"
  [ -f "$model" ] || /usr/bin/python3 tools/convert.py models/brown-llama -o "$model" --quant q8_0 >/dev/null 2>&1
fi
[ -f "$model" ] || { echo "test_windows: no model at ${KRAFLA_WINDOWS_MODEL:-.models/quality/q8_0.mlb} (set KRAFLA_WINDOWS_MODEL)" >&2; exit 2; }
command -v x86_64-w64-mingw32-g++-posix >/dev/null ||
  { echo "test_windows: apt-get install g++-mingw-w64-x86-64 wine64" >&2; exit 2; }
wine=$(scripts/find_wine.sh) || { echo "test_windows: wine is missing (apt-get install wine64)" >&2; exit 2; }
export WINEDEBUG=-all

tmp=$(mktemp -d)
server_pids=()
# shellcheck disable=SC2317  # run by the trap
cleanup() {
  for p in "${server_pids[@]}"; do kill "$p" 2>/dev/null; done
  rm -rf "$tmp"
}
trap cleanup EXIT

status=0
declare -A results
pass() { echo "    ok: $*"; }
fail() { echo "    FAIL: $*"; status=1; failed=1; }

build() {  # preset, log, cmake -D option, targets...
  local preset=$1 log=$2 option=$3
  shift 3
  cmake --preset "$preset" "$option" >"$log" 2>&1 &&
    cmake --build "build/$preset" -j "$jobs" --target "$@" >>"$log" 2>&1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Starts a server (command...) on $port, waits for /health; its pid in $server_pid.
start_server() {
  local port=$1 log=$2
  shift 2
  "$@" -m "$model" --port "$port" -t 2 --parallel 1 >"$log" 2>&1 &
  server_pid=$!
  server_pids+=("$server_pid")
  for _ in $(seq 1 240); do  # two minutes: a first Wine start sets up its prefix
    curl -sf -m 2 "http://127.0.0.1:$port/health" >/dev/null && return 0
    kill -0 "$server_pid" 2>/dev/null || return 1
    sleep 0.5
  done
  return 1
}

# The completion's text, finish reason and usage as one JSON line (ids and times differ).
completion() {
  curl -sf -m 120 "http://127.0.0.1:$1/v1/completions" -H 'Content-Type: application/json' \
    -d '{"prompt": "The jury said", "max_tokens": 24, "temperature": 0}' |
    python3 -c 'import json, sys; r = json.load(sys.stdin); c = r["choices"][0]
print(json.dumps([c["text"], c["finish_reason"], r["usage"]["completion_tokens"]]))'
}

check_run() {  # win_dir, nat_dir
  local w=$1 n=$2 args=(-m "$model" -p "The jury said" -n 24 -s 7 -t 2)
  "$n/ml_run" "${args[@]}" >"$tmp/run.native" 2>/dev/null
  "$wine" "$w/ml_run.exe" "${args[@]}" >"$tmp/run.wine" 2>"$tmp/run.err"
  if cmp -s "$tmp/run.native" "$tmp/run.wine"; then
    pass "ml_run text identical: $(head -c 60 "$tmp/run.wine" | tr '\n' ' ')…"
  else
    fail "ml_run text differs (native: $(head -c 60 "$tmp/run.native" | tr '\n' ' '); wine: $(head -c 60 "$tmp/run.wine" | tr '\n' ' '); $(tail -1 "$tmp/run.err"))"
  fi
  local cache=$tmp/pack-cache-$RANDOM
  for step in wrote mapped; do
    "$wine" "$w/ml_run.exe" "${args[@]}" --pack-cache "$cache" >"$tmp/run.cache" 2>"$tmp/run.err"
    if cmp -s "$tmp/run.native" "$tmp/run.cache" && grep -q "pack cache: $step" "$tmp/run.err"; then
      pass "ml_run --pack-cache ($step) identical"
    else
      fail "ml_run --pack-cache ($step): $(grep -m1 'pack cache\|error' "$tmp/run.err")"
    fi
  done
}

check_tok() {  # win_dir, nat_dir
  local w=$1 n=$2 text='Über naïve café – 日本語' a b
  for sub in "encode|The jury said" "encode --show-pieces|$text" "decode|1 415 19723 773"; do
    local cmd=${sub%%|*} arg=${sub#*|}
    # shellcheck disable=SC2086  # cmd is a subcommand and its flags
    a=$("$n/ml_tok" "$model" $cmd "$arg" 2>&1)
    # shellcheck disable=SC2086
    b=$("$wine" "$w/ml_tok.exe" "$model" $cmd "$arg" 2>&1)
    if [ "$a" = "$b" ]; then pass "ml_tok $cmd identical"; else fail "ml_tok $cmd: native '$a', wine '$b'"; fi
  done
  a=$(printf '%s\r\n' "$text" | "$n/ml_tok" "$model" encode -)
  b=$(printf '%s\r\n' "$text" | "$wine" "$w/ml_tok.exe" "$model" encode -)
  if [ "$a" = "$b" ]; then
    pass "ml_tok encode - (stdin, CRLF kept) identical"
  else
    fail "ml_tok encode -: native '$a', wine '$b'"
  fi
}

check_bench() {  # win_dir
  "$wine" "$1/ml_bench.exe" -m "$model" -p 32 -n 8 -t 2 >"$tmp/bench" 2>&1
  local rc=$?
  if [ $rc = 0 ] && grep -q ' pp32 ' "$tmp/bench" && grep -q ' tg8 ' "$tmp/bench"; then
    pass "ml_bench: $(grep ' tg8 ' "$tmp/bench" | awk -F'|' '{print $(NF-1)}' | xargs) t/s tg8"
  else
    fail "ml_bench rc=$rc: $(tail -2 "$tmp/bench")"
  fi
}

check_server() {  # win_dir, nat_dir, log_prefix
  local w=$1 n=$2 log=$3 pn pw want got
  pn=$(free_port)
  start_server "$pn" "$log.native-server.log" "$n/ml_server" || { fail "native ml_server did not start"; return; }
  local native_pid=$server_pid
  want=$(completion "$pn")
  kill -INT "$native_pid"
  wait "$native_pid" 2>/dev/null
  pw=$(free_port)
  if ! start_server "$pw" "$log.server.log" "$wine" "$w/ml_server.exe"; then
    fail "ml_server.exe did not answer /health: $(tail -2 "$log.server.log")"
    return
  fi
  pass "ml_server.exe /health: $(curl -s "http://127.0.0.1:$pw/health")"
  got=$(completion "$pw")
  if [ -n "$got" ] && [ "$got" = "$want" ]; then
    pass "ml_server.exe /v1/completions identical: $got"
  else
    fail "ml_server.exe /v1/completions: native $want, wine $got"
  fi
  kill -INT "$server_pid"
  local rc=0
  for _ in $(seq 1 40); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.25; done
  wait "$server_pid" 2>/dev/null || rc=$?
  if [ $rc = 0 ] && grep -q "ml_server: stopped" "$log.server.log"; then
    pass "ml_server.exe stopped on Ctrl-C (exit 0)"
  else
    kill "$server_pid" 2>/dev/null
    fail "ml_server.exe on Ctrl-C: rc=$rc, $(tail -1 "$log.server.log")"
  fi
}

for isa in "${isas[@]}"; do
  w=build/windows-$isa n=build/$isa log=build/windows-$isa/test_windows
  failed=0
  mkdir -p "$w"
  echo "=== windows-$isa: build (log $log.build.log)"
  targets=(ml_run ml_bench ml_tok ml_server) tests=-DKRAFLA_BUILD_SERVER=ON
  [ $kernel_tests = 1 ] && targets+=(kernel_tests) tests=-DKRAFLA_BUILD_TESTS=ON
  if ! build "windows-$isa" "$log.build.log" "$tests" "${targets[@]}"; then
    fail "build windows-$isa"; results[$isa]=FAIL; continue
  fi
  echo "=== $isa (native reference): build (log $log.native-build.log)"
  if ! build "$isa" "$log.native-build.log" -DKRAFLA_BUILD_SERVER=ON ml_run ml_tok ml_server; then
    fail "build $isa"; results[$isa]=FAIL; continue
  fi
  echo "=== windows-$isa: checks under $(basename "$wine")"
  "$n/ml_run" --version >/dev/null 2>"$tmp/guard.native"
  rn=$?
  "$wine" "$w/ml_run.exe" --version >/dev/null 2>"$tmp/guard.wine"
  rw=$?
  if [ $rn != $rw ] || ! cmp -s "$tmp/guard.native" "$tmp/guard.wine"; then
    fail "CPU guard: native exit $rn, wine exit $rw ($(head -1 "$tmp/guard.wine"))"
  elif [ $rw = 3 ]; then
    pass "CPU guard: exit 3 as natively: $(head -1 "$tmp/guard.wine")"
    results[$isa]="pass (guard only: this CPU lacks $isa)"
    continue
  else
    pass "CPU guard passes (exit 0), as natively"
  fi
  check_run "$w" "$n"
  check_tok "$w" "$n"
  check_bench "$w"
  check_server "$w" "$n" "$log"
  if [ $kernel_tests = 1 ]; then
    if ctest --test-dir "$w" -L kernels -j "$jobs" >"$log.kernels.log" 2>&1; then
      pass "kernel tests under wine ($(grep -o '[0-9]* tests passed\|100% tests passed.*' "$log.kernels.log" | head -1))"
    else
      fail "kernel tests under wine (see $log.kernels.log)"
    fi
  fi
  [ $failed = 0 ] && results[$isa]=pass || results[$isa]=FAIL
done

# The guard's other side: an x86 level this CPU lacks (avxvnni on AVX-512 servers before
# Sapphire Rapids, for instance), built for Windows, must exit 3 naming what is missing.
have=" $(scripts/detect_isa.sh --all) "
missing=
for isa in avxvnni avx512vnni avx2 sse41; do
  [[ "$have" != *" $isa "* ]] && { missing=$isa; break; }
done
if [ -n "$missing" ]; then
  w=build/windows-guard-$missing failed=0
  mkdir -p "$w"
  echo "=== windows-guard-$missing: a build for an ISA this CPU lacks (log $w/test_windows.build.log)"
  if cmake --preset windows-scalar -B "$w" -DKRAFLA_ISA="$missing" -DKRAFLA_BUILD_TESTS=OFF \
      -DKRAFLA_BUILD_SERVER=OFF >"$w/test_windows.build.log" 2>&1 &&
      cmake --build "$w" -j "$jobs" --target ml_run >>"$w/test_windows.build.log" 2>&1; then
    "$wine" "$w/ml_run.exe" -m "$model" -p "The jury said" >/dev/null 2>"$tmp/guard"
    rc=$?
    if [ $rc = 3 ] && grep -q "this CPU lacks" "$tmp/guard"; then
      pass "CPU guard: exit 3: $(head -1 "$tmp/guard")"
    else
      fail "CPU guard of a $missing build: exit $rc ($(head -1 "$tmp/guard"))"
    fi
  else
    fail "build windows-guard-$missing"
  fi
  [ $failed = 0 ] && results[guard]=pass || results[guard]=FAIL
fi

echo
printf '%-22s %s\n' preset result
for isa in "${isas[@]}"; do printf '%-22s %s\n' "windows-$isa" "${results[$isa]:-FAIL}"; done
[ -n "$missing" ] && printf '%-22s %s\n' "windows-guard-$missing" "${results[guard]}"
exit $status
