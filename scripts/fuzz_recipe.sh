#!/usr/bin/env bash
# The recipe libFuzzer target (tests/fuzz/recipe_fuzz.cc) with clang + ASan, run for a bounded
# time:  scripts/fuzz_recipe.sh [SECONDS] [BUILD_DIR]   (seeds: tests/fuzz/seeds/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec "$root/scripts/fuzz_build_run.sh" recipe_fuzz "${1:-20}" "${2:-$root/build/fuzz}" \
  "$root/tests/fuzz/seeds" address -O0 -lpcre2-8 -- \
  "$root"/tests/fuzz/recipe_fuzz.cc "$root"/src/recipe/*.cc "$root"/src/tokenizer/*.cc \
  "$root"/src/base/status.cc
