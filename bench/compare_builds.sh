#!/usr/bin/env bash
# This build of dtrain against another revision of it, side by side, for a change that must not cost
# speed or memory: the benchmark GPT (bench/gpt_bench.json: fp32, AdamW, clipping) on two ranks with
# one thread each, without ZeRO and at stages 1-3. The other revision is checked out into a git
# worktree, bench/out/compare_builds-tree, and built there (only the CLI). Runs alternate between the
# two builds, one at a time so they never share the cores; ROUNDS rounds interleave and each row
# reports its best. Prints a table; raw logs stay in bench/out/compare_builds/.
# Usage: bench/compare_builds.sh REVISION [STEPS] [ROUNDS]     e.g. bench/compare_builds.sh HEAD~5 10 3
set -euo pipefail
cd "$(dirname "$0")/.."
revision=${1:?usage: bench/compare_builds.sh REVISION [STEPS] [ROUNDS]}
steps=${2:-10}
rounds=${3:-2}
warmup=3
tree=bench/out/compare_builds-tree
if [ -e "$tree" ]; then git worktree remove --force "$tree"; fi
source bench/prepare.sh compare_builds
git worktree add --quiet --detach "$tree" "$revision"
ln -s "$PWD/.venv" "$tree/.venv"
echo "building $revision in $tree..." >&2
cmake -S "$tree" -B "$tree/build" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$tree/build" -j "$(nproc)" --target dtrain_cli >/dev/null
declare -A binary=([this]=build/dtrain [other]="$tree/build/dtrain")
for ((round = 1; round <= rounds; round++)); do
  for stage in 0 1 2 3; do
    for build in this other; do
      echo "round $round: $build build, ZeRO stage $stage..." >&2
      "${binary[$build]}" run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json --set train.threads=1 \
        --set train.steps=$((steps + warmup)) --set zero_optimization.stage=$stage \
        --set train.run_dir="$out/${build}_stage${stage}_$round" >"$out/${build}_stage${stage}_$round.log" 2>&1
    done
  done
done
git worktree remove --force "$tree"
/usr/bin/python3 - "$out" "$warmup" "$revision" "$(git rev-parse --short HEAD)" <<'PY'
import glob, sys
sys.path.insert(0, "bench")
from train_table import dtrain_result
out, warmup, other, this = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]

def best(build, stage):
    """The best round's tokens/s and peak RSS per rank."""
    return max((tps, rss) for tps, _, _, rss in (dtrain_result(run, warmup) for run in glob.glob(f"{out}/{build}_stage{stage}_*/")))

print(f"| sharding | {this} tok/s | {other} tok/s | ratio | {this} peak RSS/rank (MiB) | {other} peak RSS/rank (MiB) |")
print("|---|---:|---:|---:|---:|---:|")
for stage, name in ((0, "none (DDP)"), (1, "ZeRO stage 1"), (2, "ZeRO stage 2"), (3, "ZeRO stage 3")):
    (a, arss), (b, brss) = best("this", stage), best("other", stage)
    print(f"| {name} | {a:.0f} | {b:.0f} | {a / b:.3f} | {'/'.join(map(str, arss))} | {'/'.join(map(str, brss))} |")
PY
