#!/usr/bin/env bash
# The GPU engine's measurements (docs/perf.md "GPU engine"), on a machine with a Hopper GPU and a
# built cuda-release tree: the offline workload of the GPU engine issue through bench_engine —
#   flash: flash-l8 with device-random weights, 512 requests, prompts lognormal (sigma 1, median
#          1,024, clipped to [16, 4,096]), outputs lognormal (median 256, clipped to [16, 1,024]);
#   tiny : the tiny preset in the official formats (a model dir written here), 256 requests,
#          prompts median 55 in [16, 1,024], outputs median 33 in [16, 256];
# and `dsinfer bench`'s model-only decode step at the flash run's mean decode batch and context.
#   scripts/gpu_engine_bench.sh OUT_DIR [tiny] [flash] [REQUESTS]
set -uo pipefail
cd "$(dirname "$0")/.."
out="${1:?OUT_DIR}"
shift
parts=" $* "
mkdir -p "$out"
bin=build-cuda/bin
if [[ "$parts" == *" tiny "* ]]; then
  dir=/tmp/dsinfer-tiny-official
  [ -d "$dir" ] || "$bin/dsinfer" init-model --preset tiny --weights official --out "$dir" > /dev/null
  echo "== engine, tiny official, 256 requests"
  "$bin/bench_engine" --model "$dir" --device cuda --requests 256 --prompt-median 55 \
    --prompt-min 16 --prompt-max 1024 --output-median 33 --output-min 16 --output-max 256 \
    --max-running 64 --max-batch-tokens 2048 | tee -a "$out/engine_tiny.jsonl"
fi
if [[ "$parts" == *" flash "* ]]; then
  requests=512
  for p in $parts; do [[ "$p" =~ ^[0-9]+$ ]] && requests=$p; done
  echo "== engine, flash-l8 device-random, $requests requests"
  "$bin/bench_engine" --random-preset flash-l8 --device cuda --requests "$requests" \
    --prompt-median 1024 --prompt-min 16 --prompt-max 4096 --output-median 256 --output-min 16 \
    --output-max 1024 --max-running 128 --max-batch-tokens 4096 |
    tee "$out/engine_flash_last.jsonl" | tee -a "$out/engine_flash.jsonl"
  # The model alone at the engine's mean decode batch and context (graph-replayed decode steps).
  read -r batch ctx < <(python3 -c 'import json,sys; j=json.loads(open(sys.argv[1]).read());
print(round(j["mean_decode_batch"]), round(j["mean_decode_context"]))' "$out/engine_flash_last.jsonl")
  echo "== model-only decode step at batch $batch, context $ctx"
  "$bin/dsinfer" bench --preset flash-l8 --prefill 0 --batches "$batch" --context "$ctx" --steps 50 |
    grep '"decode"' | tee -a "$out/engine_flash.jsonl"
fi
