#!/usr/bin/env bash
# The main job, offline: install the dependencies, build for this CPU, make a small random
# Llama-3-shaped model with the real Llama 3 tokenizer, and run one chat turn with it.
# (Random weights speak gibberish; with a real model converted by tools/convert.py the same
# command chats. See README.md.)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh
bin=$(scripts/build.sh | tail -n 1)
model=.models/demo-llama3-q4_0.mlb
if [ ! -s "$model" ]; then
  /usr/bin/python3 tools/gen_random.py --arch llama --shape tiny --tokenizer llama3 -o .models/demo-llama3
  /usr/bin/python3 tools/convert.py .models/demo-llama3 -o "$model" --quant q4_0
fi
"$bin/ml_run" -m "$model" --chat llama3 -p "Why is the sky blue?" -n 48 -v
