#!/usr/bin/env bash
# .clang-format on the C++/CUDA lines changed since the baseline commit in .clang-format-baseline
# (a check, not a reformat of the tree): prints the reformatting clang-format wants and exits 1 if
# any changed line differs from it. Older lines are left as they are until they are touched.
#   scripts/check_format.sh            (from the repo root or anywhere inside it)
set -euo pipefail
cd "$(dirname "$0")/.."
base="$(tr -d '[:space:]' < .clang-format-baseline)"
fmt_diff="$(command -v clang-format-diff || command -v clang-format-diff-14 || true)"
if [ -z "$fmt_diff" ]; then
  echo "check_format: clang-format-diff not found (scripts/install_deps.sh installs clang-format)" >&2
  exit 1
fi
if ! git cat-file -e "$base^{commit}" 2>/dev/null; then
  echo "check_format: the baseline commit $base is not in this clone's history" >&2
  exit 1
fi
out="$(git diff -U0 --no-color "$base" -- '*.cc' '*.h' '*.cu' '*.cuh' | "$fmt_diff" -p1 -regex '.*\.(cc|h|cu|cuh)' || true)"
if [ -n "$out" ]; then
  printf '%s\n' "$out"
  echo "check_format: the lines above differ from .clang-format (changed since $base)" >&2
  exit 1
fi
echo "check_format: changed lines since ${base:0:12} follow .clang-format"
