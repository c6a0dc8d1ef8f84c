#!/usr/bin/env bash
# The main job, offline: install the dependencies, build for this CPU, convert the small model
# trained on the Brown corpus (models/brown-llama, scripts/train_tiny.py) and run one chat turn
# with it. It speaks 1960s-newspaper English without much sense: 11M parameters, 45 minutes of
# training. A real model converted by tools/convert.py chats the same way (README.md).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripts/setup.sh  # what building and running need; the test tools come with --tests
bin=$(KRAFLA_TARGETS=ml_run scripts/build.sh | tail -n 1)
model=.models/brown-llama-q8_0.mlb
mkdir -p .models
if [ ! -s "$model" ]; then
  /usr/bin/python3 tools/convert.py models/brown-llama -o "$model" --quant q8_0
fi
"$bin/ml_run" -m "$model" --chat llama2 -p "Tell me about the election." -n 64 -v
