# Sourced by the gpu_run scripts: the repository root, the clock t0, the card, the carried deps
# (.devcarry/deps.tar.xz) unpacked once, and gpu_build (configure cuda-release with -lineinfo and
# build it or the named targets, the logs kept under $OUT only on failure; exits the script when either fails).
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
t0=$(date +%s)
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
[ -d .deps ] || tar -xJf .devcarry/deps.tar.xz
gpu_build() {  # [targets...]: only these (default: everything)
  cmake --preset cuda-release -DCMAKE_CUDA_FLAGS=-lineinfo > "$OUT/configure.log" 2>&1 || { tail -30 "$OUT/configure.log"; exit 1; }
  cmake --build --preset cuda-release -j16 ${1:+--target "$@"} > "$OUT/build.log" 2>&1 || { grep -E "error" -A5 "$OUT/build.log" | head -40; exit 1; }
  echo "== build ok $(( $(date +%s) - t0 )) s"; rm -f "$OUT/build.log" "$OUT/configure.log"
}
