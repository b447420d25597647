#!/usr/bin/env bash
# ZeRO's speed on the benchmark GPT (bench/gpt_bench.json: fp32, AdamW, clipping), two ranks with one
# thread each: dtrain without ZeRO and at each stage built, against PyTorch 2.11 with DDP,
# ZeroRedundancyOptimizer (stage 1), FSDP2 fully_shard(reshard_after_forward=False) (stage 2's
# sharding) and fully_shard (stage 3), and DeepSpeed's ZeRO stages 1-3 (its CPU accelerator), over Gloo. PyTorch runs as shipped and tuned (glibc malloc
# keeping freed memory as dtrain does, and OMP_WAIT_POLICY=PASSIVE: bench/peer_settings.sh), and
# "tuned" in the table is the faster of the two. Each run
# times STEPS steps after 3 warm-up steps, one after another so they never share the cores; ROUNDS
# rounds interleave and each row reports its best. Prints a table; raw logs stay in bench/out/zero_speed/.
# Usage: bench/zero_speed.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
rounds=${2:-1}
warmup=3
source bench/prepare.sh zero_speed --peers
source bench/peer_settings.sh
declare -A settings=([shipped]="" [tuned]="$kept_malloc $passive_wait")
for ((round = 1; round <= rounds; round++)); do
  for stage in 0 1 2 3; do
    echo "round $round: dtrain, ZeRO stage $stage..." >&2
    build/dtrain run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json --set train.threads=1 \
      --set train.steps=$((steps + warmup)) --set zero_optimization.stage=$stage \
      --set train.run_dir="$out/dtrain_stage${stage}_$round" >"$out/dtrain_stage${stage}_$round.log" 2>&1
  done
  for sharding in ddp zero1 fsdp_grad_op fsdp_full ds_zero1 ds_zero2 ds_zero3; do
    for setting in shipped tuned; do
      echo "round $round: PyTorch $sharding ($setting)..." >&2
      # shellcheck disable=SC2086 # the settings split into VAR=VALUE words; FSDP's ranks sometimes abort
      # while tearing Gloo down, after printing their result (run_peer reports it)
      run_peer 2 1 bench/pytorch_gpt.py "$out/pytorch_${sharding}_$setting.json" "$out/pytorch_${sharding}_${setting}_$round" \
        ${settings[$setting]} BENCH_STEPS="$steps" BENCH_WARMUP="$warmup" BENCH_SHARDING="$sharding"
    done
  done
done
/usr/bin/python3 - "$out" "$warmup" <<'PY'
import glob, json, sys
sys.path.insert(0, "bench")
from train_table import dtrain_result
out, warmup = sys.argv[1], int(sys.argv[2])

def dtrain(stage):
    """The best round's tokens/s and peak RSS per rank."""
    return max((tps, rss) for tps, _, _, rss in (dtrain_result(run, warmup) for run in glob.glob(f"{out}/dtrain_stage{stage}_*/")))

def pytorch(sharding, setting):
    runs = [json.loads(l) for l in open(f"{out}/pytorch_{sharding}_{setting}.json") if l.startswith("{")]  # DeepSpeed prints too
    best = max(runs, key=lambda r: r["tokens_per_s"])
    return best["tokens_per_s"], [round(x) for x in best["peak_rss_mib"]]

base = dtrain(0)[0]
peers = {0: ["ddp"], 1: ["zero1", "ds_zero1"], 2: ["fsdp_grad_op", "ds_zero2"], 3: ["fsdp_full", "ds_zero3"]}
print("| sharding | dtrain tok/s | vs dtrain DDP | dtrain peak RSS/rank (MiB) | PyTorch peer | shipped tok/s | tuned tok/s | "
      "dtrain / tuned | peer peak RSS/rank (MiB) |")
print("|---|---:|---:|---:|---|---:|---:|---:|---:|")
for stage, name in ((0, "none (DDP)"), (1, "ZeRO stage 1"), (2, "ZeRO stage 2"), (3, "ZeRO stage 3 / full shard")):
    tps, rss = dtrain(stage)
    mine = f"{tps:.0f} | {tps / base:.3f}x | {'/'.join(map(str, rss))}"
    for peer in peers[stage]:
        shipped, _ = pytorch(peer, "shipped")
        tuned, prss = pytorch(peer, "tuned")
        tuned = max(tuned, shipped)  # "tuned" is the faster of the two, as in bench/train.sh
        print(f"| {name} | {mine} | {peer} | {shipped:.0f} | {tuned:.0f} | {tps / tuned:.2f}x | {'/'.join(map(str, prss))} |")
PY
