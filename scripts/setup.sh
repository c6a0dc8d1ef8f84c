#!/usr/bin/env bash
# Installs Krafla's build and test dependencies from Debian packages (idempotent: apt-get runs
# only when something is missing) and the npm packages the reference tests use.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
# What building and running need (scripts/demo.sh installs only these).
pkgs=(cmake ninja-build g++ pkg-config libcli11-dev libfmt-dev nlohmann-json3-dev libcpp-httplib-dev
      python3-numpy)
missing=()
tests=0
[[ " $* " == *" --tests "* ]] && tests=1
if [ $tests = 1 ]; then
  # The test suite's tools: GoogleTest and Google Benchmark, the cross compilers and qemu-user
  # of the other ISA presets, the linters, ccache (it builds the second preset of
  # scripts/test.sh from the first one's objects: only the kernel TU differs), and Node.js for
  # the reference tokenizer, chat templates and the OpenAI client (Debian's only when there is
  # no node already).
  pkgs+=(googletest libgtest-dev libbenchmark-dev qemu-user g++-aarch64-linux-gnu
         g++-arm-linux-gnueabihf flake8 black clang-format ccache)
  command -v node >/dev/null 2>&1 || pkgs+=(nodejs)
  command -v npm >/dev/null 2>&1 || pkgs+=(npm)
fi
# --windows: the MinGW-w64 cross compiler and Wine for scripts/test_windows.sh.
[[ " $* " == *" --windows "* ]] && pkgs+=(g++-mingw-w64-x86-64 wine64)
# --sanitizers: clang with its sanitizer and libFuzzer runtimes, for the asan and fuzz presets
# (scripts/test_sanitizers.sh, scripts/fuzz.sh).
[[ " $* " == *" --sanitizers "* ]] && pkgs+=(clang libclang-rt-dev)
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ $tests = 1 ]; then
  "$root/scripts/fetch_tokenizers.sh"
  # cpp-httplib's whole header from Debian's source package, for a static ml_server; without
  # it ml_server links Debian's shared library.
  "$root/scripts/fetch_httplib.sh" >/dev/null ||
    echo "setup: no cpp-httplib source; ml_server links the shared library" >&2
  for d in tests/tokenizer tests/unit/chat tests/server tests/release; do
    if [ -f "$root/$d/package.json" ] && [ ! -d "$root/$d/node_modules" ]; then
      echo "setup: npm install in $d" >&2
      if [ -f "$root/$d/package-lock.json" ]; then
        (cd "$root/$d" && npm ci --silent --no-audit --no-fund >/dev/null)
      else
        (cd "$root/$d" && npm install --silent --no-audit --no-fund >/dev/null)
      fi
    fi
  done
fi
