#!/usr/bin/env bash
# Builds one libFuzzer target with clang (when a source or header is newer than the binary) and
# runs it for a bounded time; the shared body of scripts/fuzz_{recipe,structured,model_files}.sh:
#   scripts/fuzz_build_run.sh NAME SECONDS BUILD_DIR SEEDS_DIR SANITIZERS OPT LINK_LIBS -- SOURCES...
# SANITIZERS: e.g. "address" or "address,undefined"; OPT: -O0 / -O1; LINK_LIBS: "" or "-lpcre2-8".
# Skips (exit 0) when clang++ is not installed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
name="$1" secs="$2" out="$3" seeds="$4" san="$5" opt="$6" libs="$7"
shift 7
[ "$1" = "--" ] && shift
srcs=("$@")
if ! command -v clang++ >/dev/null; then echo "clang++ not found: fuzzing skipped"; exit 0; fi
mkdir -p "$out/corpus"
bin="$out/$name"
# The headers beside the sources, and the public ones.
dirs=$(for s in "${srcs[@]}"; do dirname "$s"; done | sort -u)
headers=$(for d in $dirs; do ls "$d"/*.h 2>/dev/null || true; done; ls "$root"/include/dsinfer/*.h)
newest=$(ls -t "${srcs[@]}" $headers | head -1)
if [ ! -x "$bin" ] || [ "$newest" -nt "$bin" ]; then
  # One object per source, two at a time (CI machines are small); a low -O keeps the build short.
  flags=(-std=c++20 "$opt" -g -fsanitize=fuzzer-no-link,"$san" -I"$root/src" -I"$root/include")
  [[ "$san" == *undefined* ]] && flags+=(-fno-sanitize-recover=undefined)
  rm -rf "$out/obj" && mkdir -p "$out/obj"
  printf '%s\n' "${srcs[@]}" | xargs -P 2 -I{} sh -c \
    'clang++ "$@" -c "{}" -o "'"$out/obj"'/$(echo "{}" | tr / _).o"' _ "${flags[@]}"
  # shellcheck disable=SC2086  # libs: zero or more flags
  clang++ -fsanitize=fuzzer,"$san" "$out"/obj/*.o $libs -o "$bin"
fi
"$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
  "$out/corpus" "$seeds" 2>&1 | tail -5
