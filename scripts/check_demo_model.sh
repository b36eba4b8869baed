#!/usr/bin/env bash
# The PyTorch demo-model definition (tools/demo_model/dsv4.py) against the engine: random models
# with every V4 part (untied, tie_word_embeddings, and the demo config itself at 300 tokens) and,
# if given, a trained checkpoint, exported and run through `dsinfer logits` (one prefill, and
# chunks + decode); with a built tree's libraries also the MTP draft logits through
# Model::ForwardMtp (tools/demo_model/mtp_logits.cc, compiled here: one file, a few seconds).
# Fails if any logits differ by more than 1e-3 relative (measured: ~1e-6).
#   scripts/check_demo_model.sh [CKPT]
# DSINFER (default build/bin/dsinfer), BUILD_DIR (default build: its src/*/lib*.a, for the MTP
# check; skipped when absent), PYTHON (default python3; needs torch + numpy), CXX (default c++).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dsinfer="${DSINFER:-$root/build/bin/dsinfer}"
build="${BUILD_DIR:-$root/build}"
py="${PYTHON:-python3}"
work="$(mktemp -d /tmp/dsv4-check.XXXXXX)"
trap 'rm -rf "$work"' EXIT
mtp=()
libs=(model/deepseek_v4/libdsinfer_model_deepseek_v4.a cache/libdsinfer_cache.a
      backend/cpu/libdsinfer_backend_cpu.a io/libdsinfer_io.a base/libdsinfer_base.a)
if [ -f "$build/src/${libs[0]}" ]; then
  src="${SRC_DIR:-$root/src}"   # headers of the tree the libraries were built from
  "${CXX:-c++}" -std=c++20 -O2 -I"$src" -I"$src/../include" "$root/tools/demo_model/mtp_logits.cc" \
    "${libs[@]/#/$build/src/}" -lpthread -o "$work/mtp_logits"
  mtp=(--mtp-tool "$work/mtp_logits")
else
  echo "check_demo_model: no $build/src/${libs[0]}: the MTP logits are not compared" >&2
fi
"$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/untied" "${mtp[@]}"
"$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/tied" --tied "${mtp[@]}"
"$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/demo" --demo-config \
  --length 300 "${mtp[@]}"
if [ $# -ge 1 ]; then
  "$py" "$root/tools/demo_model/check_engine.py" --dsinfer "$dsinfer" --work "$work/ckpt" --ckpt "$1" "${mtp[@]}"
fi
echo "check_demo_model: OK"
