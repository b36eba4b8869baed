#!/usr/bin/env bash
# The structured-output libFuzzer target (tests/fuzz/structured_fuzz.cc) with clang + ASan, run
# for a bounded time:  scripts/fuzz_structured.sh [SECONDS] [BUILD_DIR]
# (seeds: tests/fuzz/structured_seeds/)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
exec "$root/scripts/fuzz_build_run.sh" structured_fuzz "${1:-20}" \
  "${2:-$root/build/fuzz_structured}" "$root/tests/fuzz/structured_seeds" address -O0 -lpcre2-8 -- \
  "$root"/tests/fuzz/structured_fuzz.cc "$root"/src/structured/*.cc "$root"/src/tokenizer/*.cc \
  "$root"/src/base/status.cc
