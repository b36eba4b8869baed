#!/usr/bin/env bash
# CPU smoke run of the whole demo-model pipeline (a few minutes): corpus shards -> train.py (tiny
# 'smoke' preset, a few steps, two calls to exercise resume) -> export.py -> logits check against
# the engine -> `dsinfer generate` on the exported dir.
#   scripts/demo_model_smoke.sh [CORPUS_DIR] [RUN_DIR]
# CORPUS_DIR defaults to build-demo/corpus (scripts/build_demo_corpus.sh), RUN_DIR to
# build-demo/smoke. DSINFER, PYTHON, TOKENIZER (tokenizer files to copy; default models/tiny).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
corpus="${1:-$root/build-demo/corpus}"
run="${2:-$root/build-demo/smoke}"
dsinfer="${DSINFER:-$root/build/bin/dsinfer}"
py="${PYTHON:-python3}"
tokenizer="${TOKENIZER:-$root/models/tiny}"
rm -rf "$run"
common=(--corpus "$corpus" --out "$run" --preset smoke --minutes 3 --total-minutes 6 --batch 2
        --seq 64 --eval-every 100000 --eval-windows 2 --warmup-steps 2 --indexer-dense-steps 2
        --margin 0)
"$py" "$root/tools/demo_model/train.py" "${common[@]}" --max-steps 3
"$py" "$root/tools/demo_model/train.py" "${common[@]}" --max-steps 6   # resumes from ckpt.pt
"$py" "$root/tools/demo_model/export.py" --ckpt "$run/ckpt.pt" --tokenizer "$tokenizer" --out "$run/model"
"$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --ckpt "$run/ckpt.pt" --work "$run/check"
"$dsinfer" generate --model "$run/model" --prompt "The kernel documentation explains" \
  --max-tokens 12 --seed 0 --temperature 0
echo "demo_model_smoke: OK"
