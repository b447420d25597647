#!/usr/bin/env bash
# Context parallelism's speed at seq 4096 on the Llama-shaped bench model (bench/llama_bench.json: fp32,
# AdamW, clipping 1.0, micro-batch 1): on 2 ranks x 1 thread, dp 2 (cp 1 on the same ranks: each rank
# its own sequence, so a step is 2 x 4096 tokens), cp 2 with ring attention and cp 2 with Ulysses (both
# ranks train one sequence, a step is 4096 tokens); and 1 rank x 2 threads at cp 1. Beside them the
# PyTorch 2.11 peer (bench/pytorch_context_parallel.py, tuned: bench/peer_settings.sh): first its
# context_parallel on 2 ranks over Gloo, once per SDPA route (the error it gives is the row where it
# does not run), then its whole-sequence step on 1 rank x 2 threads, eager and under torch.compile.
# Each run times STEPS steps after 2 warm-up steps; runs go one after another, ROUNDS rounds, each
# row the median. The cp runs have train.trace on: bench/ring_overlap.py reads how much of the ring's
# traffic hid behind compute, against one message's transfer time taken from the trace itself (its
# last dk/dv hops, waited for at once); dtrain bench-comm's broadcast of the same bytes between the two
# ranks is printed beside it for reference. Prints the tables; raw logs stay in bench/out/context_parallel/.
# Usage: bench/context_parallel.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-5}
rounds=${2:-3}
warmup=2
seq=4096
source bench/prepare.sh context_parallel --peers
source bench/peer_settings.sh
common=(--no-sample --config bench/llama_bench.json --set "model.seq_len=$seq" --set "train.steps=$((steps + warmup))")
declare -A layout=(
  [1x2]="--nproc-per-node 1 --set train.threads=2"
  [dp2]="--nproc-per-node 2 --set train.threads=1"
  [ring]="--nproc-per-node 2 --set train.threads=1 --set parallel.cp=2 --set parallel.context.impl=ring --set train.trace=true"
  [ulysses]="--nproc-per-node 2 --set train.threads=1 --set parallel.cp=2 --set parallel.context.impl=ulysses --set train.trace=true")

# One ring message: k and v (or their gradients, fp32 too) of the kv heads for a rank's tokens.
message_bytes=$(/usr/bin/python3 -c "
import json; m = json.load(open('bench/llama_bench.json'))['model']
print(2 * m['n_kv_head'] * ($seq // 2) * (m['d_model'] // m['n_head']) * 4)")
build/dtrain launch --nproc-per-node 2 -- build/dtrain bench-comm --ops broadcast -b "$message_bytes" -e "$message_bytes" -n 50 \
  | sed -n 's/^\[rank 0\] //p' >"$out/bench_comm.txt"

peer() {  # NAME RANKS THREADS [VAR=VALUE...]: one PyTorch run, its JSON lines appended to $out/NAME.json
  local name=$1 ranks=$2 threads=$3
  shift 3
  # shellcheck disable=SC2086,SC2154 # the settings (bench/peer_settings.sh) split into VAR=VALUE words
  run_peer "$ranks" "$threads" bench/pytorch_context_parallel.py "$out/$name.json" "$out/$name" $kept_malloc $passive_wait "$@" \
    BENCH_SEQ="$seq" BENCH_STEPS="$steps" BENCH_WARMUP="$warmup"
}

for route in default math efficient; do
  echo "PyTorch context_parallel, cp 2, SDPA route $route..." >&2
  peer pytorch_cp_$route 2 1 BENCH_MODE=cp BENCH_CP_ROUTE=$route
done
for ((round = 1; round <= rounds; round++)); do
  for l in 1x2 dp2 ring ulysses; do
    echo "round $round: dtrain $l..." >&2
    # shellcheck disable=SC2086 # the layout's options split into words
    build/dtrain run "${common[@]}" ${layout[$l]} --set train.run_dir="$out/dtrain_${l}_$round" >"$out/dtrain_${l}_$round.log" 2>&1
  done
  for mode in eager compile; do
    echo "round $round: PyTorch 1 rank x 2 threads, $mode..." >&2
    peer pytorch_full_$mode 1 2 BENCH_MODE=full BENCH_COMPILE="$([ $mode = compile ] && echo 1 || echo 0)"
  done
done
/usr/bin/python3 bench/context_parallel_table.py "$out" "$warmup" "$seq" | tee "$out/table.md"
