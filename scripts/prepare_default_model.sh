#!/usr/bin/env bash
# Writes the embedded default model: the tiny preset (every V4 layer type, deterministic weights).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f models/tiny/model.safetensors ]; then
  build/bin/dsinfer init-model --preset tiny --out models/tiny --seed 0 --weights bf16
fi
scripts/prepare_tokenizer.sh models/tiny
