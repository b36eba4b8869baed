#!/usr/bin/env bash
# Trains the demo model on a GPU machine in calls of at most 10 minutes (issue 26):
#   scripts/train_demo_model.sh CALL [TOTAL_CALLS]
# CALL 1..TOTAL_CALLS (default 2). Each call trains for MINUTES (default 8.5; 8 in the last call,
# which also exports) and checkpoints to RUN (default build-demo/run, git-ignored, kept on the
# machine between calls); the LR schedule spans all calls. The last call exports the model
# (tools/demo_model/export.py, BF16 safetensors + tokenizer files) to RUN/demo and, when $OUT is
# set, packs it with the logs as $OUT/demo_model.tar.xz.part-aa, -ab, ... (15 MiB each).
# Unpack:  cat demo_model.tar.xz.part-* | xz -d | tar -x      (gives demo/ and the logs)
# Needs the corpus shards in CORPUS (default build-demo/corpus, carried with the call) and the
# tokenizer files in TOKENIZER (default: CORPUS/tokenizer, copied there by the lead, or models/tiny).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
call="${1:?usage: scripts/train_demo_model.sh CALL [TOTAL_CALLS]}"
calls="${2:-2}"
corpus="${CORPUS:-$root/build-demo/corpus}"
run="${RUN:-$root/build-demo/run}"
py="${PYTHON:-python3}"
minutes="${MINUTES:-8.5}"
[ "$call" = "$calls" ] && minutes="${MINUTES_LAST:-8}"
total=$(awk -v c="$calls" -v m="${MINUTES:-8.5}" -v l="${MINUTES_LAST:-8}" 'BEGIN{print (c-1)*(m-0.75)+(l-0.75)}')
tokenizer="${TOKENIZER:-$corpus/tokenizer}"
[ -f "$tokenizer/tokenizer.json" ] || tokenizer="$root/models/tiny"
if [ "$call" = 1 ] && [ -f "$run/ckpt.pt" ] && [ -z "${RESUME:-}" ]; then
  echo "train_demo_model: $run/ckpt.pt exists; remove it or set RESUME=1" >&2
  exit 2
fi
if [ "$call" != 1 ] && [ ! -f "$run/ckpt.pt" ]; then
  echo "train_demo_model: call $call needs $run/ckpt.pt from call $((call - 1)) (machine released?)" >&2
  exit 2
fi
nvidia-smi --query-gpu=name,memory.used,memory.total --format=csv,noheader || true
"$py" -c 'import torch; print("torch", torch.__version__, "cuda", torch.cuda.is_available())'
"$py" "$root/tools/demo_model/train.py" --corpus "$corpus" --out "$run" --minutes "$minutes" \
  --total-minutes "$total" ${TRAIN_ARGS:-}
if [ "$call" = "$calls" ]; then
  "$py" "$root/tools/demo_model/export.py" --ckpt "$run/ckpt.pt" --tokenizer "$tokenizer" --out "$run/demo"
  if [ -n "${OUT:-}" ]; then
    tar -C "$run" -cf - demo log.jsonl summary.json | xz -T0 -6 | split -b 15M - "$OUT/demo_model.tar.xz.part-"
    ls -la "$OUT"
  fi
fi
