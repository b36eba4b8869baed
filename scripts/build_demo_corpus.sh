#!/usr/bin/env bash
# Builds the demo-model corpus (issue 26) from Debian main packages:
#   scripts/build_demo_corpus.sh [WORK_DIR] [OUT_DIR]
# WORK_DIR (default /tmp/dsinfer-demo-corpus; not the repo): the .debs, their unpacked trees and
#   the extracted plain text.
# OUT_DIR (default build-demo/corpus, git-ignored by /build*/): token-id shards
#   train_NN.u32.xz + heldout.u32.xz (uint32 little-endian, xz) and manifest.json.
# The packages, their split (train / heldout) and licenses: tools/demo_model/corpus_packages.tsv.
# Needs: apt-get (download only, no install), dpkg-deb, groff, col, pod2text, python3 (stdlib), and
# a built dsinfer for the tokenizer: DSINFER (default build/bin/dsinfer) and TOKENIZER (a
# tokenizer.json or a model dir, default models/tiny; scripts/prepare_tokenizer.sh writes one).
# MAX_TRAIN_TOKENS (default 0 = all) cuts every training package by the same fraction.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="${1:-/tmp/dsinfer-demo-corpus}"
out="${2:-$root/build-demo/corpus}"
dsinfer="${DSINFER:-$root/build/bin/dsinfer}"
tokenizer="${TOKENIZER:-$root/models/tiny}"
py="${PYTHON:-python3}"
list="$root/tools/demo_model/corpus_packages.tsv"

mkdir -p "$work/debs" "$work/root" "$out"
mapfile -t pkgs < <(grep -v '^#' "$list" | grep -v '^\s*$' | cut -f1)
echo "== downloading ${#pkgs[@]} packages into $work/debs"
(cd "$work/debs" && apt-get download "${pkgs[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
echo "== unpacking"
for p in "${pkgs[@]}"; do
  deb=$(ls "$work/debs/${p}_"*.deb | head -n1)
  rm -rf "$work/root/$p" && mkdir -p "$work/root/$p"
  dpkg-deb -x "$deb" "$work/root/$p"
  echo "$p $(basename "$deb")" >> "$work/versions.tmp"
done
sort -u "$work/versions.tmp" > "$work/versions.txt" && rm -f "$work/versions.tmp"
echo "== extracting plain text"
rm -rf "$work/text"
"$py" "$root/tools/demo_model/extract_text.py" --packages "$list" --root "$work/root" --out "$work/text"
echo "== tokenizing and writing shards into $out"
rm -f "$out"/*.u32.xz "$out"/manifest.json
"$py" "$root/tools/demo_model/make_shards.py" --text "$work/text" --dsinfer "$dsinfer" \
  --tokenizer "$tokenizer" --out "$out" --max-train-tokens "${MAX_TRAIN_TOKENS:-0}"
cp "$work/versions.txt" "$out/package_versions.txt"
du -ch "$out"/*.xz | tail -n1
