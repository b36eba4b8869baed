#!/usr/bin/env bash
# Prepared in session 41 (not run). Carry [".devcarry"]. The compiler-portability fix on both sides
# (gpu_run/s41_hc_unfused.diff): hyper_connection.cc uncontracted on the CPU, and the CUDA mHC's
# collapse and post sums unfused (__fmul_rn / __fadd_rn), so that both round as the reference's
# separate ops. Session 41 bisected (clang 14 here, GCC 13 on this machine) V4.1 config E's 2.16e-4
# to the collapse u = sum_i pre_i X_i; the CPU side alone made every golden pass on GCC 13 but 11
# GPU-vs-CPU tests fail (the GPU's sums fused). Session 42 applied the diff to the tree, with RoPE's
# rotation as explicit fmas on both sides (cpu Rope, cuda RotateWith); this runs the goldens, the
# GPU suite and the default bench (the unfused sums' cost).
source "$(dirname "$0")/common.sh"
gpu_build
goldens
gpu_suite 300
bench_flash def --batches 1,32
echo "total $(( $(date +%s) - t0 )) s"
