#!/usr/bin/env bash
# The CPU time a pipeline-parallel step costs, dtrain against the tuned PyTorch peer, on the model and
# settings of bench/pipeline_parallel.sh: a figure that a machine shared with other work moves far
# less than tokens/s, since time-slicing delays a process without adding to its CPU time. Each side
# runs twice, with 1 and with 1 + STEPS steps; the difference of the two runs' CPU time (user +
# system, every rank, /usr/bin/time) over STEPS is one step's, start-up and the first step taken out.
# PAIRS pairs alternate dtrain and the peer. Prints per pair each side's CPU seconds and wall
# seconds per step and the ratio of CPU time (peer / dtrain: above 1, dtrain needs less).
# Usage: bench/pipeline_cpu.sh [PP] [SCHEDULE] [STEPS] [PAIRS]
set -euo pipefail
cd "$(dirname "$0")/.."
pp=${1:-2}
schedule=${2:-1f1b}
steps=${3:-4}
pairs=${4:-2}
layers=8 micro=2 micro_batches=8
source bench/prepare.sh pipeline_cpu --peers
source bench/peer_settings.sh
v=$([ "$schedule" = interleaved_1f1b ] && echo 2 || echo 1)
split=$(/usr/bin/python3 -c "print(','.join(['$((layers / (pp * v)))'] * $((pp * v))))")
run_dtrain() {  # $1 steps, $2 file for "user sys wall"
  /usr/bin/time -f "%U %S %e" -o "$2" build/dtrain run --nproc-per-node "$pp" --no-sample --config bench/gpt_bench.json \
    --set train.threads=1 --set model.n_layer=$layers --set train_micro_batch_size_per_gpu=$micro \
    --set gradient_accumulation_steps=$micro_batches --set parallel.pp="$pp" --set parallel.pipeline.schedule="$schedule" \
    --set parallel.pipeline.virtual_stages="$v" --set "parallel.pipeline.split=[$split]" --set train.steps="$1" \
    --set train.run_dir="$out/dtrain_${pair}_$1" >"$out/dtrain_${pair}_$1.log" 2>&1
}
run_peer() {  # $1 timed steps after one warm-up step, $2 file for every rank's "user sys wall"
  local port pids=() r
  port=$(free_port)
  : >"$2"
  for ((r = 0; r < pp; r++)); do
    # shellcheck disable=SC2086 # the settings split into words
    env $kept_malloc $passive_wait RANK=$r WORLD_SIZE="$pp" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" BENCH_THREADS=1 \
      BENCH_LAYERS=$layers BENCH_MICRO=$micro BENCH_MICRO_BATCHES=$micro_batches BENCH_SCHEDULE="$schedule" \
      BENCH_VIRTUAL_STAGES="$v" BENCH_SPLIT="$split" BENCH_STEPS="$1" BENCH_WARMUP=1 \
      /usr/bin/time -f "%U %S %e" -a -o "$2" timeout 1200 .venv/bin/python bench/pytorch_pipeline.py >"$out/peer_${pair}_$1_$r.json" 2>"$out/peer_${pair}_$1_$r.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
}
echo "| pair | dtrain CPU s / step | dtrain wall s / step | PyTorch tuned CPU s / step | PyTorch wall s / step | PyTorch CPU / dtrain CPU |"
echo "|---:|---:|---:|---:|---:|---:|"
for ((pair = 1; pair <= pairs; pair++)); do
  echo "pair $pair: pp $pp, $schedule..." >&2
  run_dtrain 1 "$out/d1"; run_dtrain $((1 + steps)) "$out/dn"
  run_peer 1 "$out/p1"; run_peer $((1 + steps)) "$out/pn"
  /usr/bin/python3 - "$out" "$steps" "$pair" <<'PY'
import sys
out, steps, pair = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def read(name):
    rows = [[float(x) for x in l.split()] for l in open(f"{out}/{name}") if l.strip() and l.split()[0][0].isdigit()]
    return sum(r[0] + r[1] for r in rows), max(r[2] for r in rows)
(dc1, dw1), (dcn, dwn), (pc1, pw1), (pcn, pwn) = (read(n) for n in ("d1", "dn", "p1", "pn"))
d_cpu, d_wall, p_cpu, p_wall = (dcn - dc1) / steps, (dwn - dw1) / steps, (pcn - pc1) / steps, (pwn - pw1) / steps
print(f"| {pair} | {d_cpu:.2f} | {d_wall:.2f} | {p_cpu:.2f} | {p_wall:.2f} | {p_cpu / d_cpu:.2f}x |")
PY
done
