#!/usr/bin/env bash
# How a pipeline stage's memory grows with the micro-batches of a step: the demo model (4 blocks,
# d 192, 8 sequences of 128 tokens a micro-batch, fp32) at pp 2 on two one-thread ranks, each
# schedule that runs one chunk per rank (gpipe, 1f1b, zero_bubble) at 4, 8, 16 and 32 micro-batches.
# Each cell is a stage's peak tensor bytes over the steps from the counting allocator (metrics.jsonl's
# "memory" line: exact, the same from run to run), beside `dtrain estimate`'s figure for the same
# layout. 1F1B and zero-bubble hold a bounded number of micro-batches' activations, so their peaks
# should not grow with m once the boundary buffers (received activations and gradients, sends not
# yet read) do not either; GPipe holds every micro-batch's activations by design. Prints a table; raw
# logs stay in bench/out/pipeline_memory/.
# Usage: bench/pipeline_memory.sh [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-2}
source bench/prepare.sh pipeline_memory
echo "| schedule | micro-batches | stage 0 tracked MiB | stage 0 estimate | stage 1 tracked MiB | stage 1 estimate |"
echo "|---|---|---|---|---|---|"
for schedule in gpipe 1f1b zero_bubble; do
  for m in 4 8 16 32; do
    dir=$out/${schedule}_$m
    OMP_NUM_THREADS=1 build/dtrain run --nproc-per-node 2 --no-sample --set model.preset=demo --set train.threads=1 \
      --set parallel.pp=2 --set parallel.pipeline.schedule=$schedule --set gradient_accumulation_steps=$m \
      --set train.steps=$steps --set train.eval_every=0 --set checkpoint.save_at_end=false \
      --set train.run_dir=$dir >"$dir.log" 2>&1
    /usr/bin/python3 - "$dir/metrics.jsonl" "$schedule" "$m" <<'PY'
import json, sys
stages = {}
for line in open(sys.argv[1]):
    record = json.loads(line)
    memory = record.get("memory")
    if isinstance(memory, dict) and "ranks" in memory:
        for r in memory["ranks"]:
            stages[r["rank"]] = (r["measured_peak_bytes"], r["estimated_bytes"])
mib = lambda b: f"{b / 2**20:.2f}"
cells = [f"{mib(stages[r][0])} | {mib(stages[r][1])}" for r in sorted(stages)]
print(f"| {sys.argv[2]} | {sys.argv[3]} | " + " | ".join(cells) + " |")
PY
  done
done
