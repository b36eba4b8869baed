#!/usr/bin/env bash
# Copies the header-only / static build dependencies that GPU machines without Debian's -dev
# packages lack (nlohmann-json, googletest sources, PCRE2, the Boost headers the server includes)
# into .deps/ (git-ignored), where the
# CMake fallbacks find them. Run on a machine that has the packages (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p .deps/include .deps/lib
cp -r /usr/include/nlohmann .deps/include/
cp /usr/include/pcre2.h .deps/include/
cp "$(dpkg -L libpcre2-dev | grep 'libpcre2-8.a$' | head -1)" .deps/lib/
rm -rf .deps/googletest && cp -r /usr/src/googletest .deps/googletest
# Boost (header-only, for src/api): only the headers the server's sources reach, found by the
# compiler's dependency scan (all of /usr/include/boost is 160 MB).
rm -rf .deps/include/boost
for f in src/api/*.cc; do
  g++ -std=c++20 -Isrc -Iinclude -M -MT x "$f"
done | tr ' \\' '\n\n' | grep '^/usr/include/boost/' | sort -u | while read -r h; do
  mkdir -p ".deps/include/$(dirname "${h#/usr/include/}")"
  cp "$h" ".deps/include/${h#/usr/include/}"
done
cp /usr/include/boost/version.hpp .deps/include/boost/
du -sh .deps
