#!/usr/bin/env bash
# Installs the Debian packages dsinfer builds and tests with (idempotent; quick when all present).
set -euo pipefail
# libpcre2-dev: the tokenizer's pre-tokenizer regexes; clang + libclang-rt-14-dev: the recipe,
# structured and model-file fuzz targets; python3-jsonschema: the structured-output validator
# (tests/structured); clang-format: scripts/check_format.sh (the changed lines follow
# .clang-format); libboost-dev: Boost.Beast / Asio (header-only) for `dsinfer serve`; xz-utils:
# models/demo's weights are stored xz-compressed.
PKGS=(cmake ninja-build g++ pkg-config libgtest-dev nlohmann-json3-dev python3 libpcre2-dev
      clang-format clang libclang-rt-14-dev python3-jsonschema libboost-dev xz-utils)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
# Node.js + npm (tokenizer data and its oracle): any install that provides both commands will do
# (Debian's nodejs + npm, or a newer Node.js that bundles npm; Debian's npm conflicts with those).
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
