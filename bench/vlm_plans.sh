#!/usr/bin/env bash
# The vision-language model's parallel plans: preset vlm-ocr (bench/vlm_bench.json: seq 80, micro-batch
# 16 per rank, fp32, AdamW, clipping 1.0) on two local ranks with one thread each, under three plans:
# the per-module plan (vision.* frozen, connector.* kept whole on every rank, llm.* at ZeRO stage 3),
# everything at ZeRO stage 3, and everything data parallel without ZeRO; against the same model in
# plain PyTorch 2.11 (bench/pytorch_vlm.py) under the same three plans with FSDP2 and DDP over Gloo,
# as shipped and tuned (bench/peer_settings.sh), and tuned with its transformer blocks compiled by
# torch.compile. The data are fixed so that both frameworks see the same shapes: SAMPLES images of
# 256x32 pixels (4x32 patches of 8, 32 image tokens after the 2x2 merge) with a 40-character text
# each (bench/vlm_data.py), 73 of the 80 positions of every row used; dtrain reads them as a
# vlm:FILE.jsonl source, the peer synthesizes the same shapes. Each run times STEPS steps after 3
# warm-up steps, one after another so they never share the cores; ROUNDS rounds interleave, each row
# reports its best round's tokens/s and each rank's median peak memory. Prints a table
# (bench/vlm_table.py); raw logs stay in bench/out/vlm/.
# Usage: bench/vlm_plans.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-20}
rounds=${2:-3}
warmup=3
samples=256
source bench/prepare.sh vlm --peers
source bench/peer_settings.sh
declare -A settings=([shipped]="" [tuned]="$kept_malloc $passive_wait" [compiled]="$kept_malloc $passive_wait BENCH_COMPILE=1")
/usr/bin/python3 bench/vlm_data.py "$out/data" "$samples" 256 32 40

# A plan's dtrain settings, into `sets`; the peer's BENCH_PLAN takes the same names.
plan_sets() {
  case $1 in
    plan) sets=(--set zero_optimization.stage=3 --set 'parallel.modules={"vision.*": {"freeze": true}, "connector.*": {"zero_stage": 0}, "llm.*": {"zero_stage": 3}}') ;;
    fsdp_full) sets=(--set zero_optimization.stage=3) ;;
    ddp) sets=(--set zero_optimization.stage=0) ;;
  esac
}
for ((round = 1; round <= rounds; round++)); do
  for plan in plan fsdp_full ddp; do
    echo "round $round: dtrain, $plan..." >&2
    plan_sets "$plan"
    build/dtrain run --nproc-per-node 2 --no-sample --config bench/vlm_bench.json --set train.threads=1 \
      --set "data.source=vlm:$PWD/$out/data/train.jsonl" --set train.steps=$((steps + warmup)) "${sets[@]}" \
      --set train.run_dir="$out/dtrain_${plan}_$round" >"$out/dtrain_${plan}_$round.log" 2>&1
    for setting in shipped tuned compiled; do
      echo "round $round: PyTorch $plan ($setting)..." >&2
      # shellcheck disable=SC2086 # the settings split into VAR=VALUE words
      run_peer 2 1 bench/pytorch_vlm.py "$out/pytorch_${plan}_$setting.json" "$out/pytorch_${plan}_${setting}_$round" \
        ${settings[$setting]} BENCH_STEPS="$steps" BENCH_WARMUP="$warmup" BENCH_PLAN="$plan" \
        BENCH_MICRO=16 BENCH_SEQ=80 BENCH_IMAGE_H=4 BENCH_IMAGE_W=32 BENCH_TEXT=40
    done
  done
done
/usr/bin/python3 bench/vlm_table.py "$out" "$warmup"
