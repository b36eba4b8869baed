#!/usr/bin/env bash
# Prepares the embedded models: models/demo (the trained demo model, issue 26: its weights are
# stored xz-compressed in git and unpacked here), models/tiny (the tiny preset with every V4
# layer type and deterministic random weights, for tests) and models/v41-tiny (the same for
# DeepSeek-V4.1), each with the V4 tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f models/tiny/model.safetensors ]; then
  build/bin/dsinfer init-model --preset tiny --out models/tiny --seed 0 --weights bf16
fi
scripts/prepare_tokenizer.sh models/tiny
# models/v41-tiny: a DeepSeek-V4.1 model (every layer mode: window-only, ratio-2 and ratio-1 KV
# groups, Reuse and Reindex layers) with random weights and the V4 tokenizer files.
if [ ! -f models/v41-tiny/model.safetensors ]; then
  build/bin/dsinfer init-model --preset v41-tiny --out models/v41-tiny --seed 0 --weights bf16
fi
scripts/prepare_tokenizer.sh models/v41-tiny
if [ ! -f models/demo/model.safetensors ] || [ models/demo/model.safetensors.xz -nt models/demo/model.safetensors ]; then
  xz -dc models/demo/model.safetensors.xz > models/demo/model.safetensors.tmp
  mv models/demo/model.safetensors.tmp models/demo/model.safetensors
fi
scripts/prepare_tokenizer.sh models/demo
