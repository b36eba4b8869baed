#!/usr/bin/env bash
# Installs the Debian packages dsinfer builds and tests with (idempotent; quick when all present).
set -euo pipefail
PKGS=(cmake ninja-build g++ pkg-config libgtest-dev nlohmann-json3-dev nodejs npm python3)
missing=()
for p in "${PKGS[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
