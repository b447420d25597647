#!/usr/bin/env bash
# Activation checkpointing on the benchmark GPT (bench/gpt_bench.json), one rank x 2 threads, in
# fp32 and in bf16: each mode's peak resident memory and step time, beside what the activations
# should take by Korthikanti et al.'s per-layer formula. ROUNDS rounds of all the runs interleave, so
# a slow spell of a shared machine hits every row alike; each row reports its fastest round. Prints
# a table; raw logs stay in bench/out/activation_memory/.
# Usage: bench/activation_memory.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-8}
rounds=${2:-1}
warmup=2
source bench/prepare.sh activation_memory
modes=(none selective every:2 full)
for ((round = 1; round <= rounds; round++)); do
for precision in fp32 bf16; do
  for mode in "${modes[@]}"; do
    name=${precision}_${mode/:/}_$round
    echo "round $round: $precision, activation checkpointing $mode..." >&2
    build/dtrain run --nproc-per-node 1 --no-sample --config bench/gpt_bench.json --set train.threads=2 \
      --set bf16.enabled=$([ "$precision" = bf16 ] && echo true || echo false) \
      --set train.steps="$steps" --set train.activation_checkpointing="$mode" --set train.run_dir="$out/$name" \
      >"$out/$name.log" 2>&1
  done
done
done
/usr/bin/python3 - "$out" "$warmup" "$rounds" "${modes[@]}" <<'PY'
import json, re, sys
out, warmup, rounds, modes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4:]
config = json.load(open("bench/gpt_bench.json"))
m = config["model"]
s, b, h, a, layers = m["seq_len"], config["train_micro_batch_size_per_gpu"], m["d_model"], m["n_head"], m["n_layer"]
# Per layer, in bytes, for 16-bit activations (Korthikanti et al. 2022, table 2); float32 doubles it.
# The 5as/h term is the attention scores, softmax and dropout mask, which ATen's fused attention never stores.
full_formula = 2 * s * b * h * (34 + 5 * a * s / h) * layers / 2**20
no_scores = 2 * s * b * h * 34 * layers / 2**20
recompute_formula = 2 * 2 * s * b * h * layers / 2**20
print(f"model: {layers} layers, s={s}, b={b}, h={h}, a={a}")
print(f"formula per run in float32: {full_formula:.0f} MiB (with attention scores), {no_scores:.0f} MiB (fused attention), "
      f"{recompute_formula:.0f} MiB with full recompute; half of each in 16-bit")
print("| precision | activation checkpointing | peak RSS (MiB) | above full recompute (MiB) | step (s) | step time vs none |")
print("|---|---|---:|---:|---:|---:|")
for precision in ("fp32", "bf16"):
    rows = []
    for mode in modes:
        runs = []
        for round in range(1, rounds + 1):
            name = f"{precision}_{mode.replace(':', '')}_{round}"
            log = open(f"{out}/{name}.log").read()
            rss = int(re.search(r"peak RSS (\d+) MiB", log).group(1))
            steps = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl") if '"loss"' in l]
            timed = [x["step_s"] for x in steps if x["step"] > warmup]
            runs.append((sum(timed) / len(timed), rss))
        step, rss = min(runs)
        rows.append((mode, rss, step))
    base_step = rows[0][2]
    full_rss = dict((r[0], r[1]) for r in rows).get("full", rows[0][1])
    for mode, rss, step in rows:
        print(f"| {precision} | {mode} | {rss} | {rss - full_rss} | {step:.3f} | {step / base_step:.2f}x |")
PY
