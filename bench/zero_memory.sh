#!/usr/bin/env bash
# ZeRO's memory per rank on GPT-2 124M (fp32, AdamW, short sequences so that the model states
# dominate): for no ZeRO and each stage built, with 2 and 4 ranks, the model-state bytes each rank
# holds (parameters, gradients, optimizer state, as the run reports them) beside the fp32 formula,
# and rank 0's peak RSS; then, at stages 1-3 on 2 ranks, the same runs with the optimizer state
# offloaded to NVMe (in files under bench/out/zero_memory/nvme, sub_group_size 4M), and at stage 3
# the parameter shard too: what stays resident and what peak RSS saves. Peak RSS moves by a few
# hundred MiB between identical runs (when transient buffers meet), so ROUNDS rounds run one after
# another and the tables give each configuration's median and range. Prints two tables; raw logs
# stay in bench/out/zero_memory/. NVME=0 leaves out the offload runs and their table.
# Usage: bench/zero_memory.sh [STEPS] [ROUNDS] [NVME]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
rounds=${2:-3}
nvme=${3:-1}
source bench/prepare.sh zero_memory
stages=(0 1 2 3)
mkdir -p "$out/nvme"
for ((round = 1; round <= rounds; round++)); do
  for nproc in 2 4; do
    for stage in "${stages[@]}"; do
      name=dp${nproc}_stage$stage
      echo "round $round: $nproc ranks, ZeRO stage $stage..." >&2
      build/dtrain run --nproc-per-node "$nproc" --no-sample --set model.preset=gpt2-124m --set model.seq_len=64 \
        --set train_micro_batch_size_per_gpu=1 --set train_batch_size="$nproc" --set train.steps="$steps" \
        --set train.eval_every=0 --set checkpoint.save_at_end=false --set zero_optimization.stage="$stage" \
        --set train.run_dir="$out/${name}_$round" >"$out/${name}_$round.log" 2>&1
    done
  done
  ((nvme)) || continue
  for stage in 1 2 3; do
    name=dp2_stage${stage}_nvme
    echo "round $round: 2 ranks, ZeRO stage $stage, optimizer state (and at stage 3 parameters) on NVMe..." >&2
    param_offload=()
    ((stage == 3)) && param_offload=(--set "zero_optimization.offload_param={\"device\":\"nvme\",\"nvme_path\":\"$out/nvme\"}")
    build/dtrain run --nproc-per-node 2 --no-sample --set model.preset=gpt2-124m --set model.seq_len=64 \
      --set train_micro_batch_size_per_gpu=1 --set train_batch_size=2 --set train.steps="$steps" \
      --set train.eval_every=0 --set checkpoint.save_at_end=false --set zero_optimization.stage="$stage" \
      --set "zero_optimization.offload_optimizer={\"device\":\"nvme\",\"nvme_path\":\"$out/nvme\"}" \
      --set zero_optimization.sub_group_size=4000000 --set train.run_dir="$out/${name}_$round" "${param_offload[@]}" \
      >"$out/${name}_$round.log" 2>&1
  done
done
/usr/bin/python3 - "$out" "$nvme" "${stages[@]}" <<'PY'
import re, sys
import glob, statistics
out, nvme, stages = sys.argv[1], sys.argv[2] == "1", [int(s) for s in sys.argv[3:]]

def peak_rss(name):
    """Rank 0's peak RSS over the rounds: median and range."""
    rss = sorted(int(re.search(r"peak RSS (\d+) MiB", open(p).read()).group(1)) for p in glob.glob(f"{out}/{name}_[0-9]*.log"))
    return statistics.median_low(rss), rss[0], rss[-1]

def first_log(name):
    return open(f"{out}/{name}_1.log").read()

# fp32 model states per rank, in bytes per trainable parameter (docs/training.md, "ZeRO"):
# 4 parameters + 4 gradients + 8 for AdamW's two moments, sharded as each stage says.
formula = {0: lambda dp: 16, 1: lambda dp: 8 + 8 / dp, 2: lambda dp: 4 + 12 / dp, 3: lambda dp: 16 / dp}
print("| ranks | ZeRO stage | parameters (MiB) | gradients (MiB) | optimizer (MiB) | model states (MiB) | formula (MiB) | "
      "states / formula | peak RSS rank 0, median (MiB) | range (MiB) | RSS - states (MiB) |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for dp in (2, 4):
    for stage in stages:
        log = first_log(f"dp{dp}_stage{stage}")
        psi = int(re.search(r"(\d+) trainable parameters", log).group(1))
        p, g, o, total = (float(x) for x in re.search(
            r"model states on this rank: parameters ([\d.]+) MiB, gradients ([\d.]+) MiB, optimizer ([\d.]+) MiB \(([\d.]+) MiB\)", log).groups())
        rss, low, high = peak_rss(f"dp{dp}_stage{stage}")
        f = formula[stage](dp) * psi / 2**20
        print(f"| {dp} | {stage} | {p:.0f} | {g:.0f} | {o:.0f} | {total:.0f} | {f:.0f} | {total / f:.3f} | {rss} | {low}-{high} | {rss - total:.0f} |")
if not nvme:
    sys.exit()
print()
print("| ranks | ZeRO stage | offloaded | optimizer in memory (MiB) | with NVMe offload: offloaded (MiB) | buffers in memory (MiB) | "
      "peak RSS rank 0, median (MiB) | with offload, median (MiB) | range with offload (MiB) | RSS saved (MiB) | saved / offloaded |")
print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for stage in (1, 2, 3):
    plain, offloaded = first_log(f"dp2_stage{stage}"), first_log(f"dp2_stage{stage}_nvme")
    o = float(re.search(r"optimizer ([\d.]+) MiB \(", plain).group(1))
    moved, buffers = (float(x) for x in re.search(r"optimizer state \(([\d.]+) MiB\) in unnamed files .* through ([\d.]+) MiB of buffers",
                                                   offloaded).groups())
    shard = re.search(r"the parameter shard \(([\d.]+) MiB\)", offloaded)
    what = "optimizer state"
    if shard:
        moved += float(shard.group(1))
        what += ", parameters"
    rss = peak_rss(f"dp2_stage{stage}")[0]
    rss_nvme, low, high = peak_rss(f"dp2_stage{stage}_nvme")
    print(f"| 2 | {stage} | {what} | {o:.0f} | {moved:.0f} | {buffers:.0f} | {rss} | {rss_nvme} | {low}-{high} | {rss - rss_nvme} | "
          f"{(rss - rss_nvme) / moved:.2f} |")
PY
