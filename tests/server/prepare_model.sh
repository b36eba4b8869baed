#!/usr/bin/env bash
# The server tests' model: the tiny preset with the V4 tokenizer (the tokenizer_v4 fixture).
#   tests/server/prepare_model.sh DSINFER_BIN OUT_DIR TOKENIZER_DIR
set -euo pipefail
bin="$1" out="$2" tok="$3"
rm -rf "$out"
"$bin" init-model --preset tiny --out "$out" --seed 0 --weights bf16 >/dev/null
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/"
