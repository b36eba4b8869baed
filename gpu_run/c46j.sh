#!/usr/bin/env bash
# Session 46: the 128K prefill with and without QuarterSums' k-step template on one machine
# (c46g without: 4.525 s, indexer 170.9 ms; c46i with: 4.711 s, 192.7 ms; other machines).
source "$(dirname "$0")/common.sh"
gpu_build bench_indexer dsinfer
p128 tmpl
apply_diff s46_indexer_notmpl.diff
gpu_build bench_indexer dsinfer
idx notmpl
p128 notmpl
echo "total $(( $(date +%s) - t0 )) s"
