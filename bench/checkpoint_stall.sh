#!/usr/bin/env bash
# Checkpoint stall per save, checkpoint.async false against true, on GPT-2 124M (fp32, AdamW,
# sequences of 64 tokens as in bench/checkpoint_io.sh) at 1 and 2 data-parallel ranks. Each run trains
# STEPS steps and saves every EVERY (further apart than a background write takes, as a real run's saves
# are, or each save waits for the one before); each save's metrics.jsonl line gives the stall (what the step waited:
# the whole save in the step, or the copy into host buffers and any wait for the save before) and the
# write (the whole save, or the background thread's serialise, checksum, fsync and commit). Prints one
# row per save, then per ranks and mode the median stall and write and async's stall as a share of
# sync's (the goal: at most 10%). Raw logs stay in bench/out/checkpoint_stall/.
# DTRAIN names the binary to measure, as it is (no build); the default builds build/dtrain first.
# Usage: [DTRAIN=path/to/dtrain] bench/checkpoint_stall.sh [STEPS] [EVERY]   (defaults 18 6)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-18}
every=${2:-6}
if [ -n "${DTRAIN:-}" ]; then
  dtrain=$(realpath -m "$DTRAIN")
  [ -x "$dtrain" ] || { echo "DTRAIN=$DTRAIN ($dtrain) is not an executable" >&2; exit 1; }
  out=bench/out/checkpoint_stall
  rm -rf "$out" && mkdir -p "$out"
else
  source bench/prepare.sh checkpoint_stall
  dtrain=build/dtrain
fi
for ranks in 1 2; do
  for async in false true; do
    name=${ranks}_$async
    echo "$ranks rank(s), checkpoint.async $async: $steps steps, a save every $every..." >&2
    "$dtrain" run --nproc-per-node "$ranks" --no-sample --set model.preset=gpt2-124m --set model.seq_len=64 \
      --set train_micro_batch_size_per_gpu=1 --set train_batch_size="$ranks" --set train.eval_every=0 \
      --set train.steps="$steps" --set checkpoint.every_steps="$every" --set checkpoint.keep=1 --set checkpoint.async="$async" \
      --set train.run_dir="$out/$name" >"$out/$name.log" 2>&1 || { tail "$out/$name.log" >&2; exit 1; }
    rm -rf "$out/$name/ckpt"  # 1.4 GB a checkpoint
  done
done
/usr/bin/python3 - "$out" <<'PY'
import json, statistics, sys
out = sys.argv[1]

def saves(name):
    lines = [json.loads(l) for l in open(f"{out}/{name}/metrics.jsonl")]
    return sorted((l for l in lines if "checkpoint_stall_s" in l), key=lambda l: l["step"])

print("GPT-2 124M, fp32 AdamW, sequences of 64 tokens")
print("| ranks | checkpoint.async | save at step | stall (s) | of it, waiting for the save before (s) | write (s) |")
print("|---:|---|---:|---:|---:|---:|")
medians = {}
for ranks in (1, 2):
    for mode in ("false", "true"):
        rows = saves(f"{ranks}_{mode}")
        for l in rows:
            print(f"| {ranks} | {mode} | {l['step']} | {l['checkpoint_stall_s']:.3f} | {l['checkpoint_wait_s']:.3f} | {l['checkpoint_write_s']:.2f} |")
        medians[ranks, mode] = (statistics.median(l["checkpoint_stall_s"] for l in rows),
                                statistics.median(l["checkpoint_write_s"] for l in rows))
print()
print("| ranks | median stall, sync (s) | median stall, async (s) | async / sync | median write, sync (s) | median background write, async (s) |")
print("|---:|---:|---:|---:|---:|---:|")
for ranks in (1, 2):
    (s, sw), (a, aw) = medians[ranks, "false"], medians[ranks, "true"]
    print(f"| {ranks} | {s:.3f} | {a:.3f} | {100 * a / s:.1f}% | {sw:.2f} | {aw:.2f} |")
PY
