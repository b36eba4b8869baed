#!/usr/bin/env bash
# One command on a fresh Debian 12 machine: install packages, build, prepare the embedded models
# (models/demo, the trained default; models/tiny for tests), and run the main job on the default.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install_deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release -j"$(nproc)"
scripts/prepare_default_model.sh
echo
echo "== dsinfer generate on the embedded default model (models/demo) =="
build/bin/dsinfer generate --model models/demo --prompt "To install a package, run" \
  --max-tokens 40 --temperature 0.7 --seed 0
