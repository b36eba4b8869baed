#!/usr/bin/env bash
# Prepares the embedded models: models/demo (the trained demo model, issue 26: its weights are
# stored xz-compressed in git and unpacked here) and models/tiny (the tiny preset with every V4
# layer type and deterministic random weights, for tests), each with the V4 tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f models/tiny/model.safetensors ]; then
  build/bin/dsinfer init-model --preset tiny --out models/tiny --seed 0 --weights bf16
fi
scripts/prepare_tokenizer.sh models/tiny
if [ ! -f models/demo/model.safetensors ] || [ models/demo/model.safetensors.xz -nt models/demo/model.safetensors ]; then
  xz -dc models/demo/model.safetensors.xz > models/demo/model.safetensors.tmp
  mv models/demo/model.safetensors.tmp models/demo/model.safetensors
fi
scripts/prepare_tokenizer.sh models/demo
