#!/usr/bin/env bash
# The planner against measurement: `dtrain estimate --plan` ranks the layouts of the benchmark GPT
# (bench/gpt_bench.json) for 2 ranks on this machine (the model and the optimizer's update timed here,
# the CPU build's default links unless BENCH_COMM names a `dtrain bench-comm` table), then its top three run for
# STEPS steps each after 2 warm-up steps. Prints projected beside measured tokens/s and whether the
# planner's first choice is the fastest of the three measured (docs/benchmarks.md, "Planner").
# ROUNDS rounds of the three runs interleave, so a slow spell of a shared machine hits every row alike;
# each row reports its best round. Raw output stays in bench/out/planner_check/.
# Usage: bench/planner_check.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
rounds=${2:-1}
warmup=2
source bench/prepare.sh planner_check
plan_flags=(--world-size 2 --config bench/gpt_bench.json --top 3 --json)
if [ -n "${BENCH_COMM:-}" ]; then plan_flags+=(--bench-comm "$BENCH_COMM"); fi
build/dtrain estimate --plan "${plan_flags[@]}" >"$out/plan.json"
for ((round = 1; round <= rounds; round++)); do
  for rank in 0 1 2; do
    mapfile -t sets < <(/usr/bin/python3 -c 'import json, sys
top = json.load(open(sys.argv[1]))["top"]
if int(sys.argv[2]) < len(top):
    for s in top[int(sys.argv[2])]["sets"]: print("--set"); print(s)' "$out/plan.json" "$rank")
    if [ ${#sets[@]} -eq 0 ]; then continue; fi
    echo "round $round: the planner's #$((rank + 1))..." >&2
    build/dtrain run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json "${sets[@]}" \
      --set train.steps=$((steps + warmup)) --set train.run_dir="$out/top${rank}_$round" >"$out/top${rank}_$round.log" 2>&1
  done
done
/usr/bin/python3 - "$out" "$warmup" "$rounds" <<'PY'
import json, os, sys
out, warmup, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
plan = json.load(open(f"{out}/plan.json"))
print(f"{plan['considered']} layouts considered: {plan['invalid']} invalid, {plan['not_covered']} not covered, "
      f"{plan['not_fitting']} do not fit, {plan['ranked']} ranked; peak: {plan['peak_from']}")
rows = []
for rank, layout in enumerate(plan["top"]):
    means = []
    for r in range(1, rounds + 1):
        path = f"{out}/top{rank}_{r}/metrics.jsonl"
        if not os.path.exists(path):
            continue
        lines = [json.loads(l) for l in open(path)]
        rates = [l["tokens_per_s"] for l in lines if "tokens_per_s" in l and l.get("step", 0) > warmup]
        if rates:
            means.append(sum(rates) / len(rates))
    rows.append((rank + 1, layout["layout"], layout["tokens_per_s"], max(means) if means else None, means))
print(f"| # | layout | projected tokens/s | measured tokens/s, best (each round) | measured / projected |")
print(f"|---|---|---:|---:|---:|")
for rank, name, projected, measured, means in rows:
    m = f"{measured:.0f} ({', '.join(f'{x:.0f}' for x in means)})" if measured else "-"
    ratio = f"{measured / projected:.2f}" if measured else "-"
    print(f"| {rank} | {name} | {projected:.0f} | {m} | {ratio} |")
measured = [(m, r) for r, _, _, m, _ in rows if m]
if measured:
    fastest = max(measured)[1]
    print(f"the planner's choice (#1) is {'the fastest' if fastest == 1 else f'not the fastest: #{fastest} is'} of its top {len(measured)} measured")
PY
