#!/usr/bin/env bash
# Session 56: a cupti kernel trace of flash-l8's 8,192-token prefill in the mode (--fp8-mma) on
# main, summed per kernel and grid (launch shape) over the bench's three prefills (c56c, the same
# trace summed per kernel only, was folded into this and common.sh's prefill_trace).
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
prefill_trace main
echo "total $(( $(date +%s) - t0 )) s"
