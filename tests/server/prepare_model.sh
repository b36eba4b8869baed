#!/usr/bin/env bash
# A server test model: an init-model preset (tiny unless PRESET is given, e.g. v41-tiny-engram)
# with random bf16 weights and the V4 tokenizer (the tokenizer_v4 fixture).
#   tests/server/prepare_model.sh DSINFER_BIN OUT_DIR TOKENIZER_DIR [PRESET]
set -euo pipefail
bin="$1" out="$2" tok="$3" preset="${4:-tiny}"
rm -rf "$out"
"$bin" init-model --preset "$preset" --out "$out" --seed 0 --weights bf16 >/dev/null
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/"
# The tokenizer's ids must all be in the model's vocabulary (a V4.1 preset has its own vocab_size).
python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
cfg = json.load(open(d + "/config.json"))
vocab = cfg.get("text_config", cfg)["vocab_size"]
tok = json.load(open(d + "/tokenizer.json"))
top = max(max(tok["model"]["vocab"].values()), max(t["id"] for t in tok["added_tokens"]))
if top >= vocab:
    sys.exit(f"{d}: the tokenizer has id {top}, past the model's vocab_size {vocab}")
PY
