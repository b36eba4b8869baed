#!/usr/bin/env bash
# A server test model: an init-model preset (tiny unless PRESET is given) with random bf16 weights
# and the V4 tokenizer (the tokenizer_v4 fixture). For a V4.1 preset (v41-*) the tokenizer gets
# V4.1's `<｜System｜>` at id 128799 (in place of placeholder 799, as in the V4.1 release), so the
# server speaks the V4.1 chat dialect; the ids are checked to lie inside the model's vocab_size.
#   tests/server/prepare_model.sh DSINFER_BIN OUT_DIR TOKENIZER_DIR [PRESET]
set -euo pipefail
bin="$1" out="$2" tok="$3" preset="${4:-tiny}"
rm -rf "$out"
"$bin" init-model --preset "$preset" --out "$out" --seed 0 --weights bf16 >/dev/null
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$out/"
python3 - "$out" "$preset" <<'PY'
import json, sys
d, preset = sys.argv[1], sys.argv[2]
cfg = json.load(open(d + "/config.json"))
vocab = cfg.get("text_config", cfg)["vocab_size"]
tok = json.load(open(d + "/tokenizer.json", encoding="utf-8"))
top = max(max(tok["model"]["vocab"].values()), max(t["id"] for t in tok["added_tokens"]))
if top >= vocab:
    sys.exit(f"{d}: the tokenizer has id {top}, past the model's vocab_size {vocab}")
if preset.startswith("v41"):
    (entry,) = [t for t in tok["added_tokens"] if t["id"] == 128799]
    if entry["content"] != "<｜place▁holder▁no▁799｜>":
        sys.exit(f"{d}: token 128799 is {entry['content']}, not placeholder 799")
    entry["content"] = "<｜System｜>"
    with open(d + "/tokenizer.json", "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False)
PY
