#!/usr/bin/env bash
# Copies the header-only / static build dependencies that GPU machines without Debian's -dev
# packages lack (nlohmann-json, googletest sources, PCRE2) into .deps/ (git-ignored), where the
# CMake fallbacks find them. Run on a machine that has the packages (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/include .deps/lib
cp -r /usr/include/nlohmann .deps/include/
cp /usr/include/pcre2.h .deps/include/
cp "$(dpkg -L libpcre2-dev | grep 'libpcre2-8.a$' | head -1)" .deps/lib/
rm -rf .deps/googletest && cp -r /usr/src/googletest .deps/googletest
du -sh .deps
