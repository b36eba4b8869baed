#!/usr/bin/env bash
# Session 46, after c46c.sh on the same machine: everything built, the GPU suite (the indexer's
# score tree changes every path's indexer bits: the model, engine and determinism tests).
source "$(dirname "$0")/common.sh"
gpu_build
gpu_suite 420
echo "total $(( $(date +%s) - t0 )) s"
