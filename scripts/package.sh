#!/usr/bin/env bash
# Builds Krafla's release archives, one per ISA build, and runs every one before it counts.
#
#   scripts/package.sh VERSION [ARCHIVE…]   # e.g. 0.1.0, or only linux-x86_64-avx2 windows-x86_64-avx2
#   scripts/package.sh --list               # the archives it knows, with how each is run
#
# Environment: KRAFLA_PACKAGE_OUT (default out/: archives in OUT/release), KRAFLA_PACKAGE_PREBUILT
# =PRESET:DIR takes that preset's binaries from an existing static build instead of building it
# (the test suite packages its own build so), and makes it the reference.
#
# For each archive: a static Release build of its preset in build/pkg-PRESET (tests off,
# binaries stripped); the archive krafla-VERSION-PLATFORM-ISA.tar.gz holds bin/ (ml_run,
# ml_bench, ml_tok, ml_server), README.md, LICENSE, CHANGELOG.md and converter/ (tools/convert.py
# and tools/convert_tokenizer.py beside the package they run, tools/convert/; Python 3 with numpy); the Windows ones are .zip files of the .exe
# files (MinGW-w64, scripts/setup.sh --windows installs it and Wine). Then the archive is unpacked
# into a clean directory and its ml_run generates from the trained model (models/brown-llama,
# converted to Q8_0) natively, under qemu-user with a CPU of its ISA level, or under Wine (which
# runs the code on this CPU, so a Windows build needs its ISA here); the text must equal that of
# the host's native build for the same seed, and ml_server must answer /health and a
# completion. linux-x86_64-auto holds every x86 build that passed, under bin/ISA/, with a
# launcher (scripts/krafla-launch) that runs the best one for the CPU (KRAFLA_ISA chooses).
# An archive whose ISA neither this CPU nor qemu has is reported and left out
# (never published unverified). SHA256SUMS covers all archives of VERSION in out/release/.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

# archive name | preset | how to run its binaries ("" = natively; "cpu:FLAGS" = needs those
# /proc/cpuinfo flags natively; "qemu… " = under qemu-user; "wine" and "wine cpu:FLAGS" = under
# Wine) | strip tool
targets=(
  "linux-x86_64-scalar|scalar|qemu-x86_64 -cpu Opteron_G1|strip"
  "linux-x86_64-sse2|sse2|qemu-x86_64 -cpu Opteron_G1|strip"
  "linux-x86_64-sse41|sse41|qemu-x86_64 -cpu Nehalem|strip"
  "linux-x86_64-avx2|avx2|cpu:avx2 fma f16c|strip"
  "linux-x86_64-avxvnni|avxvnni|cpu:avx_vnni avx2 fma f16c|strip"
  "linux-x86_64-avx512vnni|avx512vnni|cpu:avx512f avx512bw avx512vl avx512dq avx512_vnni|strip"
  "linux-aarch64-neon|neon|qemu-aarch64 -cpu cortex-a57|aarch64-linux-gnu-strip"
  "linux-aarch64-dotprod|dotprod|qemu-aarch64 -cpu cortex-a76|aarch64-linux-gnu-strip"
  "linux-aarch64-i8mm|i8mm|qemu-aarch64 -cpu max|aarch64-linux-gnu-strip"
  "linux-aarch64-sve|sve|qemu-aarch64 -cpu max,sve512=on|aarch64-linux-gnu-strip"
  "linux-armv7-neon|neon32|qemu-arm -cpu cortex-a15|arm-linux-gnueabihf-strip"
  "windows-x86_64-scalar|windows-scalar|wine|x86_64-w64-mingw32-strip"
  "windows-x86_64-sse2|windows-sse2|wine|x86_64-w64-mingw32-strip"
  "windows-x86_64-avx2|windows-avx2|wine cpu:avx2 fma f16c|x86_64-w64-mingw32-strip"
  "windows-x86_64-avx512vnni|windows-avx512vnni|wine cpu:avx512f avx512bw avx512vl avx512dq avx512_vnni|x86_64-w64-mingw32-strip"
)
bins=(ml_run ml_bench ml_tok ml_server)
converter=(convert.py convert_tokenizer.py)  # and the package they import, tools/convert/
py=/usr/bin/python3

die() { echo "package: error: $*" >&2; exit 2; }
log() { echo "package: $*" >&2; }

if [ "${1:-}" = "--list" ]; then
  for t in "${targets[@]}"; do IFS='|' read -r name preset run _ <<<"$t"; echo "$name ($preset; run: ${run:-native})"; done
  exit 0
fi
[ $# -ge 1 ] || die "usage: scripts/package.sh VERSION [ARCHIVE…] (or --list)"
version=$1; shift
cmake_version=$(sed -n 's/^project(krafla VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
[ "$version" = "$cmake_version" ] || die "version $version is not CMakeLists.txt's $cmake_version"
wanted=("$@")
[ -z "$(git status --porcelain 2>/dev/null)" ] ||
  log "warning: the tree has uncommitted changes; the binaries' --version will say -dirty"

out=${KRAFLA_PACKAGE_OUT:-$root/out}/release
work=${KRAFLA_PACKAGE_OUT:-$root/out}/package-work
prebuilt_preset=${KRAFLA_PACKAGE_PREBUILT:-}; prebuilt_preset=${prebuilt_preset%%:*}
prebuilt_dir=${KRAFLA_PACKAGE_PREBUILT:-}; prebuilt_dir=${prebuilt_dir#*:}
mkdir -p "$out" "$work"
flags=" $(grep -m1 -E '^flags' /proc/cpuinfo | cut -d: -f2) "
has_flags() { for f in $1; do [[ "$flags" == *" $f "* ]] || return 1; done; }

# The test model and the reference text: the host's own native build.
model=$work/brown-q8_0.mlb
[ -f "$model" ] || "$py" tools/convert.py models/brown-llama --quant q8_0 -o "$model" >/dev/null
prompt="The jury said"
gen_args=(-m "$model" -p "$prompt" -n 24 -s 7 --temp 0.8 -t 2)

exe_of() { [[ "$1" == windows-* ]] && echo .exe || true; }  # preset → the executables' suffix
wine=""
find_wine() {
  [ -n "$wine" ] && return
  wine=$(scripts/find_wine.sh) && command -v x86_64-w64-mingw32-g++-posix >/dev/null ||
    die "the Windows archives need MinGW-w64 and Wine: scripts/setup.sh --windows"
  export WINEDEBUG=-all
}

pkg_dir() { if [ "$1" = "$prebuilt_preset" ]; then echo "$work/prebuilt-$1"; else echo "$root/build/pkg-$1"; fi; }

build() {  # preset strip → its pkg_dir with stripped binaries in bin/
  local preset=$1 strip=$2 dir
  dir=$(pkg_dir "$1")
  if [ "$preset" = "$prebuilt_preset" ]; then
    mkdir -p "$dir/bin"
    for b in "${bins[@]}"; do
      file "$prebuilt_dir/$b" | grep -q "statically linked" || die "$prebuilt_dir/$b is not a static binary"
      "$strip" -o "$dir/bin/$b" "$prebuilt_dir/$b"
    done
    return
  fi
  log "building $preset"
  cmake --preset "$preset" -B "$dir" -DKRAFLA_BUILD_TESTS=OFF -DKRAFLA_BUILD_BENCHMARKS=OFF \
    -DKRAFLA_BUILD_SERVER=ON -DKRAFLA_STATIC=ON >"$dir.configure.log" 2>&1 ||
    { tail -20 "$dir.configure.log" >&2; die "configure of $preset failed"; }
  cmake --build "$dir" -j"$(nproc)" --target "${bins[@]}" >"$dir.build.log" 2>&1 ||
    { grep -E "error" "$dir.build.log" | head -20 >&2; die "build of $preset failed"; }
  mkdir -p "$dir/bin"
  for b in "${bins[@]}"; do b=$b$(exe_of "$preset"); "$strip" -o "$dir/bin/$b" "$dir/$b"; done
}

host_preset=${prebuilt_preset:-$(scripts/detect_isa.sh)}
build "$host_preset" strip
reference=$("$(pkg_dir "$host_preset")/bin/ml_run" "${gen_args[@]}" 2>/dev/null)
[ -n "$reference" ] || die "the native $host_preset build generated nothing"
log "reference text ($host_preset): $reference"

# Runs one unpacked archive: ml_run's text against the reference, ml_server's answers.
check() {  # dir runner exe-suffix
  local dir=$1 runner=$2 x=${3:-} text port pid ok=0
  # shellcheck disable=SC2086
  text=$($runner "$dir/bin/ml_run$x" "${gen_args[@]}" 2>"$dir/ml_run.err") ||
    { cat "$dir/ml_run.err" >&2; return 1; }
  if [ "$text" != "$reference" ]; then
    log "  text differs: $text"
    return 1
  fi
  # shellcheck disable=SC2086
  $runner "$dir/bin/ml_tok$x" "$model" encode "$prompt" >/dev/null || return 1
  port=$((20000 + RANDOM % 20000))
  # shellcheck disable=SC2086
  $runner "$dir/bin/ml_server$x" -m "$model" --port "$port" -t 2 -q 2>"$dir/server.err" &
  pid=$!
  for _ in $(seq 300); do  # a minute: a first Wine start sets up its prefix
    curl -sf "http://127.0.0.1:$port/health" >/dev/null && break
    sleep 0.2
  done
  if curl -sf "http://127.0.0.1:$port/v1/completions" \
       -d "{\"prompt\": \"$prompt\", \"max_tokens\": 4, \"temperature\": 0}" | grep -q '"text_completion"'; then
    ok=1
  fi
  kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true
  [ "$ok" = 1 ] || { log "  ml_server did not answer"; cat "$dir/server.err" >&2; return 1; }
}

# Stages krafla-VERSION-NAME with the binaries of BINDIR (copied as they are, links too) and
# writes its archive: $archive, .zip for Windows (Python's zipfile: no zip tool needed), else
# .tar.gz.
stage_archive() {  # name bindir
  stem=krafla-$version-$1
  local stage=$work/$stem
  rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/converter"
  cp -a "$2/." "$stage/bin/"
  cp README.md LICENSE CHANGELOG.md "$stage/"
  for f in "${converter[@]}"; do cp "tools/$f" "$stage/converter/"; done
  tar -C tools --exclude=__pycache__ -cf - convert | tar -C "$stage/converter" -xf -
  if [[ "$1" == windows-* ]]; then
    archive=$stem.zip
    rm -f "$out/$archive"
    (cd "$work" && "$py" -m zipfile -c "$out/$archive" "$stem")
  else
    archive=$stem.tar.gz
    tar -C "$work" -czf "$out/$archive" "$stem"
  fi
}

unpack() {  # archive-file dir
  case $1 in
    *.zip) "$py" -m zipfile -e "$1" "$2" ;;
    *) tar -C "$2" -xzf "$1" ;;
  esac
}

# Runs the archive just written from a clean unpacked copy, not the staging directory.
verify() {  # name runner exe-suffix
  local probe
  probe=$(mktemp -d)
  unpack "$out/$archive" "$probe"
  log "$1: checking (${2:-native})"
  if ! check "$probe/$stem" "$2" "${3:-}"; then
    rm -f "$out/$archive"
    die "$1: the archive failed its run (left in $probe)"
  fi
  rm -rf "$probe"
}

written=() skipped=() x86=()
for t in "${targets[@]}"; do
  IFS='|' read -r name preset run strip <<<"$t"
  if [ ${#wanted[@]} -gt 0 ] && [[ " ${wanted[*]} " != *" $name "* ]]; then continue; fi
  runner=""
  if [[ "$run" == wine* ]]; then
    find_wine
    runner=$wine
    run=${run#wine}
    run=${run# }
  fi
  if [[ "$run" == cpu:* ]]; then
    if ! has_flags "${run#cpu:}"; then
      log "$name: not run, so not packaged: this CPU lacks ${run#cpu:} and qemu has no such CPU"
      skipped+=("$name")
      continue
    fi
  elif [ -n "$run" ]; then
    runner=$run
  fi
  [ "$preset" = "$host_preset" ] || build "$preset" "$strip"
  stage_archive "$name" "$(pkg_dir "$preset")/bin"
  verify "$name" "$runner" "$(exe_of "$preset")"
  written+=("$archive")
  [[ "$name" == linux-x86_64-* ]] && x86+=("$preset")
  log "$name: ok"
done

# linux-x86_64-auto: every x86 build packaged above under bin/ISA/, and a launcher that runs the
# best one for the CPU (scripts/krafla-launch). Checked as the others, then with each ISA
# forced through KRAFLA_ISA.
if [ ${#x86[@]} -gt 1 ] && { [ ${#wanted[@]} -eq 0 ] || [[ " ${wanted[*]} " == *" linux-x86_64-auto "* ]]; }; then
  auto=$work/auto-bin
  rm -rf "$auto" && mkdir -p "$auto"
  cp scripts/krafla-launch "$auto/"
  for p in "${x86[@]}"; do cp -r "$(pkg_dir "$p")/bin" "$auto/$p"; done
  for b in "${bins[@]}"; do ln -s krafla-launch "$auto/$b"; done
  stage_archive linux-x86_64-auto "$auto"
  verify linux-x86_64-auto ""
  written+=("$archive")
  probe=$(mktemp -d)
  unpack "$out/$archive" "$probe"
  for p in "${x86[@]}"; do
    has_isa=$(KRAFLA_ISA=$p "$probe/$stem/bin/ml_run" --version 2>&1 || true)
    [[ "$has_isa" == *"ISA $p;"* ]] || die "auto: KRAFLA_ISA=$p ran: $has_isa"
  done
  log "linux-x86_64-auto: the launcher picks $("$probe/$stem/bin/ml_run" --version | sed -n 's/.*ISA \([a-z0-9]*\).*/\1/p') here; KRAFLA_ISA chooses"
  rm -rf "$probe"
fi

(cd "$out" && sha256sum krafla-"$version"-* >SHA256SUMS)
log "wrote ${#written[@]} archives and SHA256SUMS to $out"
[ ${#skipped[@]} -eq 0 ] || log "not packaged (no CPU to run them): ${skipped[*]}"
