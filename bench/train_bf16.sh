#!/usr/bin/env bash
# bf16 training, dtrain against PyTorch 2.11's torch.autocast("cpu", dtype=torch.bfloat16), on the
# GPT of bench/train.sh (bench/gpt_bench.json, the same model bench/pytorch_gpt.py builds), with
# activation checkpointing none, full and selective (PyTorch: torch.utils.checkpoint around each
# block, or around the attention core). Layouts 1 rank x 2 threads and 2 ranks x 1 thread. dtrain
# times STEPS steps after 3 warm-up steps; PyTorch's bf16 step is ~30x slower on CPUs without
# AVX512-BF16, so it times PT_STEPS steps after 1 warm-up step. PyTorch runs as shipped and tuned
# (glibc malloc keeping freed memory as dtrain does, plus OMP_WAIT_POLICY=PASSIVE: the settings of
# bench/train.sh) without checkpointing, and tuned with it. dtrain's fp32 run without checkpointing
# is the reference for the bf16 speed-up. Runs go one after another, never sharing the cores.
# Usage: bench/train_bf16.sh [STEPS] [PT_STEPS]     Prints a table (outputs kept in bench/out/bf16).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
pt_steps=${2:-1}
warmup=3
source bench/prepare.sh bf16 --peers
source bench/peer_settings.sh
tuned="$kept_malloc $passive_wait"

pytorch() {  # pytorch TAG SETTING AC RANKS THREADS
  local tag=$1 setting=$2 ac=$3 ranks=$4 threads=$5
  echo "PyTorch bf16 ($setting, AC $ac), $ranks rank(s) x $threads thread(s)..." >&2
  # shellcheck disable=SC2046 # the settings split into VAR=VALUE words
  run_peer "$ranks" "$threads" bench/pytorch_gpt.py "$out/pytorch_${setting}_${ac}_$tag.json" "$out/pytorch_${setting}_${ac}_$tag" \
    $([ "$setting" = tuned ] && echo "$tuned") BENCH_PRECISION=bf16 BENCH_AC="$ac" BENCH_WARMUP=1 BENCH_STEPS="$pt_steps"
}

for layout in "1 2" "2 1"; do
  read -r ranks threads <<<"$layout"
  tag="${ranks}x${threads}"
  for run in "fp32 none" "bf16 none" "bf16 full" "bf16 selective"; do
    read -r precision ac <<<"$run"
    echo "dtrain $precision (AC $ac), $ranks rank(s) x $threads thread(s)..." >&2
    build/dtrain run --nproc-per-node "$ranks" --no-sample --config bench/gpt_bench.json \
      --set bf16.enabled=$([ "$precision" = bf16 ] && echo true || echo false) --set train.activation_checkpointing="$ac" \
      --set train.threads="$threads" --set train.steps=$((steps + warmup)) --set train.run_dir="$out/dtrain_${precision}_${ac}_$tag" \
      >"$out/dtrain_${precision}_${ac}_$tag.log" 2>&1
  done
  pytorch "$tag" shipped none "$ranks" "$threads"
  for ac in none full selective; do pytorch "$tag" tuned "$ac" "$ranks" "$threads"; done
done
/usr/bin/python3 bench/train_bf16_table.py "$out" "$warmup"
