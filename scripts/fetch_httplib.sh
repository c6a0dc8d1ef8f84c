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
# deb-src entries for the suites the system already uses, if there are none.
if ! apt-get source --print-uris -qq cpp-httplib >/dev/null 2>&1; then
  echo "fetch_httplib: adding Debian source entries (/etc/apt/sources.list.d/krafla-src.sources)" >&2
  $sudo tee /etc/apt/sources.list.d/krafla-src.sources >/dev/null <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
  $sudo apt-get update -qq
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
