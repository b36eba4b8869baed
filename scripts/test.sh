#!/usr/bin/env bash
# The test command: builds and runs every CPU test (unit, golden, e2e), then the unit tests again
# under AddressSanitizer + UndefinedBehaviorSanitizer. CPU only; no GPU needed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
python3 scripts/check_layering.py
scripts/check_format.sh
jobs="$(nproc)"
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j"$jobs"
ctest --preset cpu-release -j"$jobs"
cmake --preset cpu-debug-asan >/dev/null
cmake --build --preset cpu-debug-asan -j"$jobs"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset cpu-debug-asan -L unit -j"$jobs"
