#!/usr/bin/env bash
# The online serving benchmark (docs/perf.md "Online serving"): `dsinfer serve` on the GPU with
# the flash-l8 preset (device-random weights, DeepSeek's tokenizer for text out), driven by
# tools/bench/serving_bench.py (aiohttp) with Poisson arrivals at several rates: TTFT, TPOT,
# inter-token latency, end-to-end latency and goodput per rate, one JSON line each.
#   scripts/gpu_serving_bench.sh OUT_DIR [RATES] [NUM_PROMPTS] [INPUT_LEN] [OUTPUT_LEN]
# Environment: PRESET (flash-l8), SERVE_ARGS (extra engine flags), PYTHON, SLO_TTFT_MS (1000),
# SLO_TPOT_MS (50), PORT (8011).
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?OUT_DIR}"
rates="${2:-2,8,16,32}"
num="${3:-200}"
input_len="${4:-512}"
output_len="${5:-128}"
preset="${PRESET:-flash-l8}"
port="${PORT:-8011}"
python="${PYTHON:-python3}"
mkdir -p "$out"
bin=build-cuda/bin/dsinfer
tok="${TOKENIZER:-models/tiny/tokenizer.json}"
[ -f "$tok" ] || tok=models/demo/tokenizer.json
# shellcheck disable=SC2086
"$bin" serve --random-preset "$preset" --device cuda --tokenizer "$tok" --port "$port" \
  --max-running 64 --max-batch-tokens 2048 ${SERVE_ARGS:-} > "$out/serve.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null' EXIT
for _ in $(seq 600); do
  curl -sf "http://127.0.0.1:$port/health" > /dev/null && break
  kill -0 $server 2>/dev/null || { echo "the server exited"; tail -20 "$out/serve.log"; exit 1; }
  sleep 0.5
done
curl -sf "http://127.0.0.1:$port/health" > /dev/null || { echo "the server never got ready"; exit 1; }
"$python" tools/bench/serving_bench.py --url "http://127.0.0.1:$port" --rates "$rates" \
  --num-prompts "$num" --input-len "$input_len" --output-len "$output_len" --range-ratio 0.5 \
  --slo-ttft-ms "${SLO_TTFT_MS:-1000}" --slo-tpot-ms "${SLO_TPOT_MS:-50}" \
  --tag "{\"preset\": \"$preset\", \"serve_args\": \"${SERVE_ARGS:-}\"}" | tee -a "$out/serving.jsonl"
curl -s "http://127.0.0.1:$port/metrics" > "$out/metrics.txt"
