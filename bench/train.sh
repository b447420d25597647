#!/usr/bin/env bash
# dtrain against PyTorch 2.11 (the same wheel whose LibTorch dtrain links, in .venv) on the same GPT:
# 6 layers, 6 heads, d=384, seq 256, micro-batch 8, vocab 256, fp32, AdamW, clipping 1.0, DDP over
# Gloo. Two layouts: one rank with 2 threads, and two ranks with 1 thread each; both frameworks get
# the same thread count. PyTorch runs three times: as shipped; with glibc malloc keeping freed
# memory as dtrain keeps it (src/train/host_memory.h, here as the equivalent MALLOC_* variables);
# and with that plus OMP_WAIT_POLICY=PASSIVE. "Tuned" is the fastest of the three. Each run times
# STEPS steps after 3 warm-up steps; the runs go one after another so they never share the cores,
# and ROUNDS rounds of all of them interleave, so that a slow spell of a shared machine hits every
# row alike; each row reports its best round. Last, bench/profile.sh says where one rank's step
# goes (the share in matrix multiplication) on the same build.
# Usage: bench/train.sh [STEPS] [ROUNDS]     Prints two tables (also kept in bench/out/train/).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
rounds=${2:-1}
warmup=3
source bench/prepare.sh train --peers
source bench/peer_settings.sh
declare -A settings=([shipped]="" [malloc]="$kept_malloc" [malloc+passive]="$kept_malloc $passive_wait")

for ((round = 1; round <= rounds; round++)); do
for layout in "1 2" "2 1"; do
  read -r ranks threads <<<"$layout"
  tag="${ranks}x${threads}"
  echo "round $round: dtrain, $ranks rank(s) x $threads thread(s)..." >&2
  build/dtrain run --nproc-per-node "$ranks" --no-sample --config bench/gpt_bench.json \
    --set train.threads="$threads" --set train.steps=$((steps + warmup)) --set train.run_dir="$out/dtrain_${tag}_$round" \
    >"$out/dtrain_${tag}_$round.log" 2>&1
  for setting in shipped malloc malloc+passive; do
    echo "round $round: PyTorch ($setting), $ranks rank(s) x $threads thread(s)..." >&2
    # shellcheck disable=SC2086 # the settings split into VAR=VALUE words
    run_peer "$ranks" "$threads" bench/pytorch_gpt.py "$out/pytorch_${setting}_$tag.json" "$out/pytorch_${setting}_${tag}_$round" \
      ${settings[$setting]} BENCH_STEPS="$steps"
  done
done
done
/usr/bin/python3 bench/train_table.py "$out" "$warmup"
echo
bench/profile.sh 12 1
