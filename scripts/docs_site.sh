#!/usr/bin/env bash
# Builds the documentation site offline the way GitHub Pages does (.github/workflows/pages.yml),
# less the Just the Docs theme, which Pages fetches at build time: Debian's Jekyll with the three
# plugins docs/_config.yml names. Fails on any build error or warning, and unless every
# docs/*.md became a page and the home page's links to .md files point at the built pages.
#
#   scripts/docs_site.sh [OUT]     # default build/site
#
# Exit 77 (skipped) when Jekyll or a plugin is missing: apt-get install jekyll
# ruby-jekyll-optional-front-matter ruby-jekyll-relative-links ruby-jekyll-titles-from-headings
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/site}
command -v jekyll >/dev/null || { echo "docs_site: skipped: no jekyll (apt-get install jekyll)" >&2; exit 77; }
for p in optional-front-matter relative-links titles-from-headings; do
  dpkg-query -W -f='${Status}' "ruby-jekyll-$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "docs_site: skipped: no ruby-jekyll-$p" >&2; exit 77; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/offline.yml" <<'YML'
remote_theme: null
plugins:
  - jekyll-optional-front-matter
  - jekyll-titles-from-headings
  - jekyll-relative-links
YML
cp -r "$root/docs" "$tmp/src"  # Jekyll writes a cache into its source
log=$(cd "$tmp/src" && jekyll build --config _config.yml,"$tmp/offline.yml" -d "$out" 2>&1)
status=$?
if [ $status -ne 0 ] || grep -qiE "error|warning|liquid" <<<"$log"; then
  echo "$log" >&2
  echo "docs_site: the build failed or warned" >&2
  exit 1
fi
missing=0
for md in "$root"/docs/*.md; do
  page=$out/$(basename "${md%.md}").html
  [ -s "$page" ] || { echo "docs_site: no page for docs/$(basename "$md")" >&2; missing=1; }
done
if grep -qE 'href="[^"#]*\.md"' "$out/index.html"; then
  echo "docs_site: index.html still links .md files" >&2
  missing=1
fi
[ $missing = 0 ] || exit 1
echo "docs_site: $(ls "$out"/*.html | wc -l) pages in $out"
