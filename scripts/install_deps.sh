#!/usr/bin/env bash
# Installs the Debian packages dsinfer builds and tests with (idempotent; quick when all present).
set -euo pipefail
# libpcre2-dev: the tokenizer's pre-tokenizer regexes; clang + libclang-rt-14-dev: the recipe fuzz target.
PKGS=(cmake ninja-build g++ pkg-config libgtest-dev nlohmann-json3-dev nodejs npm python3 libpcre2-dev
      clang libclang-rt-14-dev)
missing=()
for p in "${PKGS[@]}"; do
  # A node/npm that is already on PATH (e.g. a newer Node.js that bundles npm) is kept: Debian's
  # npm package conflicts with such installs.
  if [ "$p" = nodejs ] && command -v node >/dev/null; then continue; fi
  if [ "$p" = npm ] && command -v npm >/dev/null; then continue; fi
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
