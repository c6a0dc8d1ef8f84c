#!/usr/bin/env bash
# Builds tests/kernels/kernel_dump.cpp (standalone, without GoogleTest) against the kernels of a source tree for one ISA, with
# the compile flags of the CMake build (Release: -O3 -DNDEBUG, cmake/isa_flags.cmake), runs it
# natively or under the preset's qemu and prints its output. Run it on two checkouts (e.g. the
# commit before a kernel refactoring, in a second worktree, and the one after) and diff.
#
#   tests/kernels/kernel_dump.sh ISA [SOURCE_TREE] [OUT_DIR]   (default tree: this checkout)
#   e.g.  diff <(tests/kernels/kernel_dump.sh sse41 /tmp/base) <(tests/kernels/kernel_dump.sh sse41)
# KRAFLA_DUMP_SVE_VL=<bits> runs the sve build at that vector length (default 512, the preset's).
set -euo pipefail
isa=$1
here=$(cd "$(dirname "$0")/../.." && pwd)
src=$(cd "${2:-$here}" && pwd)
out=${3:-$(mktemp -d)}
mkdir -p "$out"
cxx=g++ run=() args=()
case $isa in
  scalar) f=() ;;
  sse2) f=(-msse2) run=(qemu-x86_64 -cpu Opteron_G1) ;;
  sse41) f=(-msse4.1 -mssse3 -mpopcnt) run=(qemu-x86_64 -cpu Nehalem) ;;
  avx2) f=(-mavx2 -mfma -mf16c) ;;
  avxvnni) f=(-mavx2 -mfma -mf16c -mavxvnni)
    # qemu 7.2 emulates AVX2 but not AVX-VNNI: without it here, all but the int8 matmuls.
    grep -qw avx_vnni /proc/cpuinfo || run=(qemu-x86_64 -cpu max) args=(--no-int8-matmul) ;;
  avx512vnni) f=(-mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni -mavx2 -mfma -mf16c) ;;
  neon32) cxx=arm-linux-gnueabihf-g++ run=(qemu-arm -cpu cortex-a15)
    f=(-march=armv7-a -mfpu=neon-vfpv4 -mfloat-abi=hard -mfp16-format=ieee) ;;
  neon) cxx=aarch64-linux-gnu-g++ run=(qemu-aarch64 -cpu cortex-a57) f=(-march=armv8-a) ;;
  dotprod) cxx=aarch64-linux-gnu-g++ run=(qemu-aarch64 -cpu cortex-a76)
    f=(-march=armv8.2-a+dotprod) ;;
  i8mm) cxx=aarch64-linux-gnu-g++ run=(qemu-aarch64 -cpu max) f=(-march=armv8.2-a+dotprod+i8mm) ;;
  sve) cxx=aarch64-linux-gnu-g++ run=(qemu-aarch64 -cpu "max,sve${KRAFLA_DUMP_SVE_VL:-512}=on")
    f=(-march=armv8.2-a+sve) ;;
  *) echo "unknown ISA $isa" >&2; exit 2 ;;
esac
launcher=()
command -v ccache >/dev/null && launcher=(ccache)
common=(-O3 -DNDEBUG -std=c++20 -I"$src" -DKRAFLA_ISA_"${isa^^}")
objs=("$out/common.o" "$out/scalar.o")
"${launcher[@]}" "$cxx" "${common[@]}" -c "$src/kernels/common.cpp" -o "$out/common.o"
"${launcher[@]}" "$cxx" "${common[@]}" -c "$src/kernels/scalar.cpp" -o "$out/scalar.o"
if [ "$isa" != scalar ]; then
  "${launcher[@]}" "$cxx" "${common[@]}" "${f[@]}" -c "$src/kernels/$isa.cpp" -o "$out/isa.o"
  objs+=("$out/isa.o")
fi
"${launcher[@]}" "$cxx" "${common[@]}" -DKRAFLA_KERNEL_DUMP_MAIN -c "$here/tests/kernels/kernel_dump.cpp" -o "$out/dump.o"
"$cxx" -static "${objs[@]}" "$out/dump.o" -o "$out/kernel_dump"
"${run[@]}" "$out/kernel_dump" "${args[@]}"
