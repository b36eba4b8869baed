#!/usr/bin/env bash
# Builds the recipe libFuzzer target (tests/fuzz/recipe_fuzz.cc) with clang + ASan/UBSan and runs
# it for a bounded time:  scripts/fuzz_recipe.sh [SECONDS] [BUILD_DIR]
# Skips (exit 0) when clang++ is not installed. Seeds come from tests/fuzz/seeds/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-20}"; out="${2:-$root/build/fuzz}"
if ! command -v clang++ >/dev/null; then echo "clang++ not found: fuzzing skipped"; exit 0; fi
mkdir -p "$out/corpus"
bin="$out/recipe_fuzz"
srcs=("$root"/tests/fuzz/recipe_fuzz.cc "$root"/src/recipe/*.cc "$root"/src/tokenizer/*.cc "$root"/src/base/status.cc)
newest=$(ls -t "${srcs[@]}" "$root"/src/recipe/*.h "$root"/src/tokenizer/*.h | head -1)
if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
  # One object per source, two at a time (CI machines are small); -O0 keeps the build short.
  flags=(-std=c++20 -O0 -g -fsanitize=fuzzer-no-link,address -I"$root/src" -I"$root/include")
  mkdir -p "$out/obj"
  printf '%s\n' "${srcs[@]}" | xargs -P 2 -I{} sh -c \
    'clang++ "$@" -c "{}" -o "'"$out/obj"'/$(echo "{}" | tr / _).o"' _ "${flags[@]}"
  clang++ -fsanitize=fuzzer,address "$out"/obj/*.o -lpcre2-8 -o "$bin"
fi
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" "$root/tests/fuzz/seeds" 2>&1 | tail -5
