#!/usr/bin/env bash
# The model-file libFuzzer target (tests/fuzz/model_files_fuzz.cc: config.json parsing and the
# safetensors parser) with clang + ASan/UBSan, run for a bounded time:
#   scripts/fuzz_model_files.sh [SECONDS] [BUILD_DIR]   (seeds: tests/fuzz/seeds_model_files/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec "$root/scripts/fuzz_build_run.sh" model_files_fuzz "${1:-20}" \
  "${2:-$root/build/fuzz_model_files}" "$root/tests/fuzz/seeds_model_files" address,undefined -O1 "" -- \
  "$root"/tests/fuzz/model_files_fuzz.cc "$root"/src/io/*.cc "$root"/src/base/status.cc \
  "$root"/src/base/dtype.cc
