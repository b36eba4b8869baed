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
# Under the sanitizers, the V4.1 golden mixes (about 2 minutes each there) are left to the release
# pass above: the V4 golden mixes and the smaller V4.1 engine tests run the same engine paths.
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset cpu-debug-asan -L unit \
  -E 'GoldenV41Mix|EngineV41Test.EveryBudgetAndBatch' -j"$jobs"
