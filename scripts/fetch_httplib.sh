#!/usr/bin/env bash
# Puts cpp-httplib's single-header implementation in .deps/cpp-httplib/httplib.h, from Debian's
# source package of the libcpp-httplib-dev installed here (`apt-get source`: signed by the
# archive, Debian's patches applied). Debian's binary package has only a shared library and a
# declarations-only header; with the whole header ml_server compiles the HTTP code in and links
# statically like the other executables (and cross-compiles). Idempotent; prints the directory.
# Without it (no deb-src access) CMake falls back to the shared library.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=$root/.deps/cpp-httplib
if [ -f "$dest/httplib.h" ]; then
  echo "$dest"
  exit 0
fi
sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
# deb-src entries mirroring the system's own Debian/Ubuntu "deb" entries, if there are none.
if ! apt-get source --print-uris -qq cpp-httplib >/dev/null 2>&1; then
  list=/etc/apt/sources.list.d/krafla-src.sources
  entries=$(for f in /etc/apt/sources.list.d/*.sources; do
              [ -f "$f" ] && awk -v RS= -v ORS='\n\n' \
                '/(^|\n)Types: *deb *(\n|$)/ && /(debian\.org|ubuntu\.com)/' "$f"
            done | sed 's/^Types: *deb *$/Types: deb-src/')
  if [ -z "$entries" ] && [ -f /etc/apt/sources.list ]; then  # one-line format
    list=/etc/apt/sources.list.d/krafla-src.list
    entries=$(grep -E '^deb .*(debian\.org|ubuntu\.com)' /etc/apt/sources.list | sed 's/^deb /deb-src /')
  fi
  if [ -z "$entries" ]; then
    echo "fetch_httplib: error: no Debian or Ubuntu apt source to add deb-src entries for" >&2
    exit 2
  fi
  echo "fetch_httplib: adding source entries ($list)" >&2
  printf '%s\n' "$entries" | $sudo tee "$list" >/dev/null
  if ! $sudo apt-get update -qq; then
    $sudo rm -f "$list"
    echo "fetch_httplib: error: apt-get update failed with the source entries (removed again)" >&2
    exit 2
  fi
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && apt-get source -qq cpp-httplib >/dev/null 2>&1)
src=$(find "$tmp" -maxdepth 2 -name httplib.h -path '*cpp-httplib-*' | head -1)
if [ -z "$src" ] || ! grep -q "inline bool is_socket_alive" "$src"; then
  echo "fetch_httplib: error: no single-header httplib.h in Debian's cpp-httplib source" >&2
  exit 2
fi
mkdir -p "$dest"
cp "$src" "$(dirname "$src")/LICENSE" "$dest/"
grep -m1 CPPHTTPLIB_VERSION "$dest/httplib.h" | sed 's/^/fetch_httplib: /' >&2
echo "$dest"
