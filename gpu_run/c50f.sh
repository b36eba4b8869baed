#!/usr/bin/env bash
# Session 50, carry [".devcarry"]; the tree is main with s50_fused_swiglu_quant.diff (second form:
# the SwiGLU epilogue in MmaWsExpertKernel<kFp4, true>, 13.4 ms slower on the mode's prefill in
# c50e). ncu of layer 0's W3 (the fused kernel) and of its W1 (the unfused kernel, the same shape)
# in the mode's 8,192-token prefill: where the fused epilogue's time goes.
source "$(dirname "$0")/common.sh"
gpu_build dsinfer
run_ncu() {  # name, kernel regex (demangled)
  timeout 150 ncu --clock-control none --kernel-name-base demangled -k "regex:$2" --launch-count 1 --set full --import-source yes -o "$OUT/$1" \
    build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --fp8-mma --batches 1 --steps 1 --prefill 8192 > "$OUT/ncu_$1.log" 2>&1; echo "ncu $1 rc=$? $(( $(date +%s) - t0 )) s"
  [ -f "$OUT/$1.ncu-rep" ] || { tail -5 "$OUT/ncu_$1.log"; return; }
  ncu -i "$OUT/$1.ncu-rep" --page details > "$OUT/${1}_details.txt" 2>&1
  ncu -i "$OUT/$1.ncu-rep" --page source --csv --print-source sass > "$OUT/${1}_source.csv" 2>&1
  rm -f "$OUT/$1.ncu-rep"; xz -9 "$OUT/${1}_source.csv"
  grep -E "Duration|Issue Slots Busy|No Eligible|DRAM Throughput|Registers Per" "$OUT/${1}_details.txt" | head -6
}
run_ncu ws_fused 'MmaWsExpertKernel<.bool.1, .bool.1>'
run_ncu ws_plain 'MmaWsExpertKernel<.bool.1, .bool.0>'
echo "total $(( $(date +%s) - t0 )) s"
