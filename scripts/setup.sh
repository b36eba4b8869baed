#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install packages, build, prepare the embedded default
# model (models/tiny), and run the main job on it.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j"$(nproc)"
scripts/prepare_default_model.sh
echo
echo "== dsinfer generate on the embedded default model (models/tiny) =="
build/bin/dsinfer generate --model models/tiny --prompt "The DeepSeek-V4 engine says:" \
  --max-tokens 24 --seed 0
