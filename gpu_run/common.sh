# Sourced by the gpu_run scripts: the repository root, the clock t0, the card, the carried deps
# (.devcarry/deps.tar.xz) unpacked once, and gpu_build (configure cuda-release with -lineinfo and
# build it or the named targets, the logs kept under $OUT only on failure; exits the script when
# either fails), fp8mma_tests (gpu_fp8mma_test on both expert kernels), bench_flash (flash-l8's
# model bench), baseline_from_stash (main's kernels on the same card), gpu_suite (ctest -L gpu),
# goldens, apply_diff / unapply_diff, ncu_kernel, attn and attn4 (bench_attention), gemm and gemm_experts_ab (bench_fp8_gemm), idx
# (bench_indexer), long32k and p128 (the mode's 32K and 128K prefills), hcall / hc_same / hctest
# (the mHC kernels' bench_hc figures and out_hash, their comparison, the HcTest op tests), timeline
# (a cupti kernel timeline of graph-replayed decode steps), prefill_trace (the mode's prefill's
# kernels summed), bf16q (bench_qgemm's bf16 shapes).
#
# The device's checkout has this tree's files but an older .git (session 46: `git checkout` of a
# recent commit failed there, and `git stash` restored an older commit's files). So a baseline is
# taken by applying and reversing diffs (apply_diff, git apply -R), never by stash or checkout;
# baseline_from_stash is kept for the record of session 42's c42f, whose "main" it may not have been.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
[ -d .deps ] || tar -xJf .devcarry/deps.tar.xz
# A warm machine keeps the last call's objects, and this call's copy of the tree brings this
# machine's older mtimes: a source that the last call changed by a diff and reversed would not be
# rebuilt (session 49: c49a's "main" attention was c49b's diff). So apply_diff lists the files it
# changes in build-cuda/.diff_files (kept with the objects), and the next call makes them newer
# than every object first.
if [ -f build-cuda/.diff_files ]; then
  touch $(sort -u build-cuda/.diff_files) 2>/dev/null
  rm -f build-cuda/.diff_files
fi
gpu_build() {  # [targets...]: only these (default: everything)
  cmake --preset cuda-release -DCMAKE_CUDA_FLAGS=-lineinfo > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build --preset cuda-release -j16 ${1:+--target "$@"} > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -40; exit 1; }
  echo "== build ok $(( $(date +%s) - t0 )) s"; rm -f "$OUT/build.log" "$OUT/configure.log"
}
# flash-l8's model bench (8,192-token prefill, FP8 cache) with the given flags into
# $OUT/bench_NAME.jsonl; prints decode steps, the prefill and the routed experts' time.
bench_flash() {  # name, flags...
  local n=$1; shift
  timeout 150 build-cuda/bin/dsinfer bench --preset flash-l8 --steps 10 --prefill 8192 --kv-cache-dtype fp8 "$@" > "$OUT/bench_$n.jsonl" 2>&1; echo "bench $n rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "decode", "batch": [0-9]*, "context": [0-9]*, "step_ms": [0-9.]*\|"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"moe_routed_experts_ms": [0-9.]*' "$OUT/bench_$n.jsonl" | tr '\n' ' '; echo
  grep -iE "error|abort|fail" "$OUT/bench_$n.jsonl" | head -3
}
# gpu_fp8mma_test on the warp-specialized experts' kernel and on the gather tile, logs into $OUT,
# the failures' first lines printed.
fp8mma_tests() {
  for m in "" "--no-fp8mma-ws-experts"; do
    timeout 60 build-cuda/bin/gpu_fp8mma_test $m > "$OUT/fp8mma_test$m.log" 2>&1; echo "gpu_fp8mma_test $m rc=$?"
    grep -hE "FAILED|Failure" -A4 "$OUT/fp8mma_test$m.log" | head -12
  done
}
# A same-card baseline: the tree's changes stashed, bench_fp8_gemm and dsinfer rebuilt from the
# commit, the routed experts' shapes and the mode's 8,192-token prefill timed, the changes restored.
baseline_from_stash() {
  git stash -q && gpu_build bench_fp8_gemm dsinfer
  for s in expert_w1 expert_w2; do timeout 60 build-cuda/bin/bench_fp8_gemm --only $s | grep '"fp8_gemm"' | cut -c30-60,150-240; done
  bench_flash mma0 --batches 1 --fp8-mma
  git stash pop -q
}
# The GPU suite (the two npm-dependent tests left out) into $OUT/ctest.log, within `limit` seconds;
# prints the count and the failures' first lines.
gpu_suite() {  # [limit]
  timeout "${1:-300}" ctest --test-dir build-cuda -L gpu -E "tokenizer_v4_setup|structured_e2e_gpu" --timeout 200 -j8 --output-on-failure > "$OUT/ctest.log" 2>&1; echo "ctest rc=$? $(( $(date +%s) - t0 )) s"
  grep -E "tests passed|tests failed|\*\*\*Failed|actual" "$OUT/ctest.log" | head -20
}
# The CPU goldens as this machine's compiler builds them (the V4.1 and V4 transformers goldens).
goldens() {
  for g in golden_v41_test golden_test; do
    build-cuda/bin/$g 2>&1 | grep -E "actual|PASSED|FAILED  \] [0-9]" | head -5
  done
}
# Applies a prepared diff of gpu_run/ to the tree (the script ends when it does not apply).
apply_diff() {  # name
  git apply "gpu_run/$1" || { echo "$1 does not apply"; exit 1; }
  mkdir -p build-cuda && grep '^+++ b/' "gpu_run/$1" | cut -c7- >> build-cuda/.diff_files
}
# Reverses a diff apply_diff applied (the script ends when it does not reverse); its files are
# listed for the next call's rebuild as apply_diff lists them.
unapply_diff() {  # name
  git apply -R "gpu_run/$1" || { echo "$1 does not reverse"; exit 1; }
  mkdir -p build-cuda && grep '^+++ b/' "gpu_run/$1" | cut -c7- >> build-cuda/.diff_files
}
# ncu (full set, source-level samples) of one launch of kernel `name` (a regex) in a command, the
# launches before it skipped: the details page and the SASS with its samples (xz) into $OUT, the
# duration and the issue figures printed.
ncu_kernel() {  # name, skip, command...
  local k=$1 skip=$2; shift 2
  timeout 150 ncu --clock-control none -k regex:$k --launch-skip "$skip" --launch-count 1 --set full --import-source yes -o "$OUT/$k" "$@" > "$OUT/ncu_$k.log" 2>&1; echo "ncu $k rc=$? $(( $(date +%s) - t0 )) s"
  [ -f "$OUT/$k.ncu-rep" ] && ncu -i "$OUT/$k.ncu-rep" --page details > "$OUT/${k}_details.txt" 2>&1 && ncu -i "$OUT/$k.ncu-rep" --page source --csv --print-source sass > "$OUT/${k}_source.csv" 2>&1 && rm -f "$OUT/$k.ncu-rep" && xz -9 "$OUT/${k}_source.csv"
  grep -E "Grid Size|Duration|DRAM Throughput|Issue Slots Busy|No Eligible" "$OUT/${k}_details.txt" | head -5
}
# bench_attention at decode rows 1 and 32 and the 8,192-token prefill (tc_packed_qp) into
# $OUT/attn_NAME.jsonl; prints each shape's us.
attn() {  # name
  timeout 100 build-cuda/bin/bench_attention --rows 1,32 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - -
}
# bench_attention at decode rows 1 / 32 / 128 / 256 and the 8,192-token prefill (tc_packed_qp)
# into $OUT/attn_NAME.jsonl; prints each shape's us on one line.
attn4() {  # name
  timeout 100 build-cuda/bin/bench_attention --rows 1,32,128,256 --prefill 8192 --variants tc_packed_qp > "$OUT/attn_$1.jsonl" 2>&1; echo "bench_attention $1 rc=$?"
  grep -o '"kind": "[a-z]*", "rows": [0-9]*, "prefill": [a-z]*\|"us": [0-9.]*' "$OUT/attn_$1.jsonl" | paste -d" " - - | tr '\n' ';'; echo
}
# bench_fp8_gemm (a 256-output sample checked) with the given flags into $OUT/fp8_gemm_NAME.jsonl;
# prints each shape's kernel, us and mismatches.
gemm() {  # name, flags...
  local n=$1; shift
  timeout 150 build-cuda/bin/bench_fp8_gemm --sample 256 "$@" > "$OUT/fp8_gemm_$n.jsonl" 2>&1; echo "bench_fp8_gemm $n rc=$? $(( $(date +%s) - t0 )) s"
  grep '"fp8_gemm"' "$OUT/fp8_gemm_$n.jsonl" | grep -o '"shape": "[a-z_0-9]*"\|"kernel": "[a-z_]*"\|"us": [0-9.]*\|"mismatches": [0-9]*' | paste -d" " - - - -
}
# bench_fp8_gemm's routed experts' shapes (8,192 tokens) on main's tile, then with the given flag,
# into $OUT/gemm_<flag's first letters>_<shape>.jsonl; prints each one's us and mismatches.
gemm_experts_ab() {  # flag
  for f in "" "$1"; do
    for s in expert_w1 expert_w2; do
      timeout 60 build-cuda/bin/bench_fp8_gemm --sample 256 --only $s $f > "$OUT/gemm_${f:2:3}_$s.jsonl" 2>&1
      echo "gemm $f $s rc=$? $(grep -o '"us": [0-9.]*\|"mismatches": [0-9]*' "$OUT/gemm_${f:2:3}_$s.jsonl" | tr '\n' ' ')"
    done
  done
}
# bench_indexer (tensor cores; rows 1, 32 and the 8,192-token prefill) into $OUT/indexer_NAME.jsonl;
# prints each shape's us.
idx() {  # name
  timeout 60 build-cuda/bin/bench_indexer --rows 1,32 --prefill 8192 --variants tc > "$OUT/indexer_$1.jsonl" 2>&1; echo "bench_indexer $1 rc=$?"
  grep -o '"rows": [0-9]*, "prefill": [a-z]*, "variant": "[a-z_]*"\|"us": [0-9.]*' "$OUT/indexer_$1.jsonl" | paste -d" " - -
}
# The mode's 32,768-token prefill in chunks of 8,192 into $OUT/bench_32k_NAME.jsonl; prints its
# seconds and the indexer's share of the profiled last chunk.
long32k() {  # name
  timeout 90 build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --fp8-mma --batches 1 --steps 3 --prefill 32768 --prefill-chunk 8192 > "$OUT/bench_32k_$1.jsonl" 2>&1; echo "32k $1 rc=$?"
  grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"indexer_topk_ms": [0-9.]*' "$OUT/bench_32k_$1.jsonl" | tr '\n' ' '; echo
}
# The mode's 131,072-token prefill in chunks of 8,192 into $OUT/bench_128k_NAME.jsonl; prints its
# seconds and the indexer's share of the profiled last chunk.
p128() {  # name
  timeout 150 build-cuda/bin/dsinfer bench --preset flash-l8 --kv-cache-dtype fp8 --fp8-mma --batches 1 --steps 3 --prefill 131072 --prefill-chunk 8192 > "$OUT/bench_128k_$1.jsonl" 2>&1; echo "128k $1 rc=$? $(( $(date +%s) - t0 )) s"
  grep -o '"bench": "prefill", "tokens": [0-9]*, "chunk": [0-9]*, "seconds": [0-9.]*\|"indexer_topk_ms": [0-9.]*' "$OUT/bench_128k_$1.jsonl" | tr '\n' ' '; echo
}
# bench_hc's pre, post and MoE post at 1 .. 8,192 rows into $OUT/hcall_NAME.jsonl; prints each
# kernel's us.
hcall() {  # name
  timeout 90 build-cuda/bin/bench_hc --kernels pre,post,post_moe --tokens 1,32,128,256,512,8192 > "$OUT/hcall_$1.jsonl" 2>&1; echo "bench_hc $1 rc=$?"
  grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*, "us": [0-9.]*' "$OUT/hcall_$1.jsonl" | tr '\n' ';'; echo
}
# Whether two hcall runs' out_hash agree at every kernel and size (the same bits).
hc_hashes() { grep -o '"kernel": "[a-z_]*", "tokens": [0-9]*\|"out_hash": "[0-9a-f]*"' "$OUT/hcall_$1.jsonl"; }
hc_same() {  # name_a, name_b
  diff <(hc_hashes "$1") <(hc_hashes "$2") && echo "out_hash: $1's bits at every kernel and size" || echo "out_hash: DIFFERENT"
}
# gpu_ops_test's HcTest cases into $OUT/hc_ops_test_NAME.log; prints the failures' first lines.
hctest() {  # name
  timeout 120 build-cuda/bin/gpu_ops_test --gtest_filter='HcTest.*' > "$OUT/hc_ops_test_$1.log" 2>&1; echo "gpu_ops_test HcTest $1 rc=$?"; grep -E "PASSED|FAILED|Failure" -A3 "$OUT/hc_ops_test_$1.log" | head -12
}
# A cupti kernel timeline (tools/cupti_trace) of graph-replayed decode steps at batch `batch` of
# flash-l8 with the FP8 cache into $OUT/timeline_bBATCH.txt (its chain: end order, what each
# kernel adds); prints its head.
timeline() {  # batch
  local tr=build-cuda/libcupti_trace.so
  [ -f $tr ] || g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include \
    tools/cupti_trace/cupti_trace.cc -L/usr/local/cuda/lib64 -lcupti -o $tr || return 1
  LD_PRELOAD=$tr DSINFER_TRACE_OUT=/tmp/trace_b$1.csv timeout 90 build-cuda/bin/dsinfer bench \
    --preset flash-l8 --batches $1 --prefill 0 --steps 3 --kv-cache-dtype fp8 > /dev/null 2>&1
  python3 tools/cupti_trace/timeline.py /tmp/trace_b$1.csv --chain > "$OUT/timeline_b$1.txt" 2>&1
  echo "timeline b$1 rc=$? $(( $(date +%s) - t0 )) s"
  head -30 "$OUT/timeline_b$1.txt"
}
# A cupti kernel trace of flash-l8's 8,192-token prefill in the mode (the bench's three prefills
# and one decode step), summed per kernel and launch shape into $OUT/prefill_kernels_NAME.txt (ms
# per prefill); prints the top 70.
prefill_trace() {  # name
  local tr=build-cuda/libcupti_trace.so
  [ -f $tr ] || g++ -O2 -std=c++20 -shared -fPIC -I/usr/local/cuda/include \
    tools/cupti_trace/cupti_trace.cc -L/usr/local/cuda/lib64 -lcupti -o $tr || return 1
  LD_PRELOAD=$tr DSINFER_TRACE_OUT=/tmp/trace_p.csv timeout 150 build-cuda/bin/dsinfer bench \
    --preset flash-l8 --batches 1 --prefill 8192 --steps 1 --kv-cache-dtype fp8 --fp8-mma > "$OUT/bench_trace_$1.jsonl" 2>&1
  echo "trace rc=$? $(( $(date +%s) - t0 )) s"
  python3 - /tmp/trace_p.csv > "$OUT/prefill_kernels_$1.txt" <<'PY'
import collections, sys
tot = collections.defaultdict(float); cnt = collections.Counter()
for i, line in enumerate(open(sys.argv[1])):
    if i == 0: continue
    f = line.rstrip("\n").split(",", 9)
    key = (f[9][:70], f[5], f[6], f[7], f[8])
    tot[key] += (int(f[1]) - int(f[0])) / 1e6; cnt[key] += 1
print("ms_per_prefill count mean_us name grid block")
for k, t in sorted(tot.items(), key=lambda x: -x[1])[:70]:
    print(f"{t/3:8.2f} {cnt[k]:6d} {1000*t/cnt[k]:9.1f} {k[0]} ({k[1]},{k[2]},{k[3]}) {k[4]}")
PY
  head -70 "$OUT/prefill_kernels_$1.txt"
}
# bench_qgemm's bf16 shapes (the head, the router's gate, the compressors; or only the shapes
# given) on the tensor cores at `tokens` rows into $OUT/qgemm_NAME.jsonl; prints each shape's
# kernel and us.
bf16q() {  # name, tokens[, shapes...]
  local n=$1 tokens=$2 s; shift 2
  for s in ${@:-head router_gate csa_compressor hca_compressor index_compressor}; do
    timeout 60 build-cuda/bin/bench_qgemm --tokens "$tokens" --only $s >> "$OUT/qgemm_$n.jsonl" 2>&1
  done
  echo "bench_qgemm $n tokens $tokens"; grep -o '"shape": "[a-z_]*"\|"kernel": "[a-z_0-9]*"\|"us": [0-9.]*\|"weight_gbps": [0-9]*' "$OUT/qgemm_$n.jsonl" | paste -d" " - - - - | tr '\n' ';'; echo
}
