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
# Only the unit tests' binaries: the sanitizer pass runs label unit (the CLI, server, benches and
# the other labels' tests are built and run in the release pass).
cmake --build --preset cpu-debug-asan -j"$jobs" --target unit_tests
# Under the sanitizers (5-20x slower) the longest engine mixes are left to the release pass above,
# to keep CI near 20 minutes on 2 cores: the V4.1 golden mixes and the V4.1 instances of the
# prefix-cache and speculative family tests that take 20-26 s there (the V4 instances and
# engine_v41_test's smaller runs cover the same engine paths; the other V4.1 instances run), the V4.1 Engram engine mix (its prefix-hit and speculative tests stay), and
# the prefix cache's memory-pressure mixes (its other tests stay; the engine preemption mixes with
# the host tier cover kept preempted states under the sanitizers),
# and four mixes of 50-75 s there whose paths smaller tests cover under the sanitizers too: the
# host tier's later-hits mix (its unit tests and the preemption mixes with the tier), the overlap
# on/off golden mix (the overlap engine tests), the cost model's mix and the speculative golden mix
# (the verified-drafts family test).
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --preset cpu-debug-asan -L unit \
  -E 'GoldenV41Mix|EngineV41Test.EveryBudgetAndBatch|EngineV41EngramTest.EveryBudget|PrefixCacheFamilyTest.(SharedPrefixes|OverlapScheduling|SharedStatePages).*/V41|EngineSpeculativeFamilyTest.(NgramAndModel|PreemptionWithDrafts).*/V41|MemoryPressure|PreemptedRequestsResume|HostTierKeepsEvictedStatesForLaterHits|GoldenMixIsTheSameWithOverlapOnAndOff|CostModelChoosesTheDraftLength|EngineSpeculativeTest.GoldenMixGives' -j"$jobs"
