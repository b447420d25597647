#!/usr/bin/env bash
# Data-parallel scaling of the benchmark GPT (bench/gpt_bench.json) on this node, by backend: one rank
# with one thread, then two ranks with one thread each on shared memory (the default) and on Gloo.
# Runs interleave over ROUNDS rounds and each row reports its best. Prints tokens/s, the scaling over
# one rank, and the gradient all-reduce time each rank waited for (what overlap did not hide).
# Usage: bench/scaling.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-15}
rounds=${2:-2}
warmup=3
source bench/prepare.sh scaling
for ((round = 1; round <= rounds; round++)); do
  for run in "1 auto" "2 auto" "2 gloo"; do
    read -r ranks backend <<<"$run"
    echo "round $round: $ranks rank(s), backend $backend..." >&2
    build/dtrain run --nproc-per-node "$ranks" --no-sample --config bench/gpt_bench.json --set train.threads=1 \
      --set dist.backend="$backend" --set train.steps=$((steps + warmup)) --set wall_clock_breakdown=true \
      --set train.run_dir="$out/${ranks}_${backend}_$round" >"$out/${ranks}_${backend}_$round.log" 2>&1
  done
done
/usr/bin/python3 - "$out" "$warmup" <<'PY'
import glob, json, sys
out, warmup = sys.argv[1], int(sys.argv[2])
def result(run_dir):
    steps = [json.loads(l) for l in open(f"{run_dir}/metrics.jsonl") if '"loss"' in l]
    timed = [s for s in steps if s["step"] > warmup]
    tokens = timed[0]["tokens_per_s"] * timed[0]["step_s"]
    step_s = sum(s["step_s"] for s in timed) / len(timed)
    exposed = sum(s.get("comm_ms", 0) - s.get("comm_hidden_ms", 0) for s in timed) / len(timed)
    return tokens / step_s, step_s, exposed
rows = {}
for name, label in (("1_auto", "1 rank x 1 thread"), ("2_auto", "2 ranks x 1 thread, shared memory"), ("2_gloo", "2 ranks x 1 thread, Gloo")):
    runs = [result(d) for d in glob.glob(f"{out}/{name}_*") if not d.endswith(".log")]
    rows[name] = (label, max(runs))
base = rows["1_auto"][1][0]
print("| layout | tokens/s | scaling over 1 rank | step (s) | all-reduce not hidden (ms/step) |")
print("|---|---:|---:|---:|---:|")
for name, (label, (tps, step_s, exposed)) in rows.items():
    print(f"| {label} | {tps:,.0f} | {tps / base:.2f}x | {step_s:.3f} | {exposed:.1f} |")
PY
