#!/usr/bin/env bash
# Builds the model-file libFuzzer target (tests/fuzz/model_files_fuzz.cc: config.json parsing and
# the safetensors header parser) with clang + ASan/UBSan and runs it for a bounded time:
#   scripts/fuzz_model_files.sh [SECONDS] [BUILD_DIR]
# Skips (exit 0) when clang++ is not installed. Seeds come from tests/fuzz/seeds_model_files/.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
secs="${1:-20}"; out="${2:-$root/build/fuzz_model_files}"
if ! command -v clang++ >/dev/null; then echo "clang++ not found: fuzzing skipped"; exit 0; fi
mkdir -p "$out/corpus"
bin="$out/model_files_fuzz"
srcs=("$root"/tests/fuzz/model_files_fuzz.cc "$root"/src/io/*.cc "$root"/src/base/status.cc
      "$root"/src/base/dtype.cc)
newest=$(ls -t "${srcs[@]}" "$root"/src/io/*.h "$root"/src/base/*.h | head -1)
if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
  # One object per source, two at a time (CI machines are small); -O1 keeps the build short.
  flags=(-std=c++20 -O1 -g -fsanitize=fuzzer-no-link,address,undefined
         -fno-sanitize-recover=undefined -I"$root/src" -I"$root/include")
  mkdir -p "$out/obj"
  printf '%s\n' "${srcs[@]}" | xargs -P 2 -I{} sh -c \
    'clang++ "$@" -c "{}" -o "'"$out/obj"'/$(echo "{}" | tr / _).o"' _ "${flags[@]}"
  clang++ -fsanitize=fuzzer,address,undefined "$out"/obj/*.o -o "$bin"
fi
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" "$root/tests/fuzz/seeds_model_files" 2>&1 | tail -5
