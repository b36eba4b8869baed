#!/usr/bin/env bash
# The PyTorch demo-model definition (tools/demo_model/dsv4.py) against the engine: random models
# with every V4 part (untied and tie_word_embeddings) and, if given, a trained checkpoint, exported
# and run through `dsinfer logits` (one prefill and chunks + decode); fails if the logits differ
# by more than 1e-3 relative (measured: ~1e-6).
#   scripts/check_demo_model.sh [CKPT]
# DSINFER (default build/bin/dsinfer), PYTHON (default python3; needs torch + numpy).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dsinfer="${DSINFER:-$root/build/bin/dsinfer}"
py="${PYTHON:-python3}"
work="$(mktemp -d /tmp/dsv4-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
"$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/untied"
"$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/tied" --tied
if [ $# -ge 1 ]; then
  "$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/ckpt" --ckpt "$1"
fi
echo "check_demo_model: OK"
