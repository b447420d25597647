#!/usr/bin/env bash
# Checkpoint save and load time on GPT-2 124M at 4 data-parallel ranks, ZeRO stage 3 (fp32, AdamW).
# Each round trains one step and saves a checkpoint at its end ("checkpoint: DIR (X s)"), then
# starts again in the same run directory, which resumes from that checkpoint ("resumed from DIR at
# step 1 (load X s)": from choosing the checkpoint until every rank holds its pieces) and trains one
# more step without saving; the load reads what the save has just written, mostly from the page
# cache. Sequences are 64 tokens, as in bench/zero_memory.sh: the step is not
# what is measured, and the checkpoint holds every GPT-2 124M tensor but a shorter position
# embedding. Prints one row per round and the median; raw logs stay in bench/out/checkpoint_io/.
# DTRAIN names the binary to measure (default build/dtrain), so that two builds can be compared
# one after the other; a binary without the load line shows "n/a" for the load.
# Usage: [DTRAIN=path/to/dtrain] bench/checkpoint_io.sh [ROUNDS]
set -euo pipefail
dtrain=$(realpath -m "${DTRAIN:-$(dirname "$0")/../build/dtrain}")
cd "$(dirname "$0")/.."
rounds=${1:-3}
if [ -n "${DTRAIN:-}" ] && [ ! -x "$dtrain" ]; then echo "DTRAIN=$DTRAIN ($dtrain) is not an executable" >&2; exit 1; fi
source bench/prepare.sh checkpoint_io
job=(--nproc-per-node 4 --no-sample --set model.preset=gpt2-124m --set model.seq_len=64
  --set train_micro_batch_size_per_gpu=1 --set train_batch_size=4 --set train.eval_every=0
  --set zero_optimization.stage=3)
for ((round = 1; round <= rounds; round++)); do
  dir=$out/run_$round
  echo "round $round: $dtrain, 1 step and a checkpoint..." >&2
  "$dtrain" run "${job[@]}" --set train.steps=1 --set train.run_dir="$dir" >"$out/save_$round.log" 2>&1 ||
    { tail "$out/save_$round.log" >&2; exit 1; }
  echo "round $round: resuming from it..." >&2
  "$dtrain" run "${job[@]}" --set train.steps=2 --set checkpoint.save_at_end=false --set train.run_dir="$dir" \
    >"$out/load_$round.log" 2>&1 || { tail "$out/load_$round.log" >&2; exit 1; }
  du -sb "$dir/ckpt/step-00000001" | cut -f1 >"$out/size_$round"
  rm -rf "$dir/ckpt"  # 1.4 GB a round
done
/usr/bin/python3 - "$out" "$rounds" "$dtrain" <<'PY'
import re, statistics, sys
out, rounds, binary = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def seconds(pattern, log):
    m = re.search(pattern, open(f"{out}/{log}").read())
    return float(m.group(1)) if m else None

rows = []
for r in range(1, rounds + 1):
    save = seconds(r"checkpoint: \S+ \(([\d.]+) s\)", f"save_{r}.log")
    load = seconds(r"resumed from \S+ at step 1 \(load ([\d.]+) s", f"load_{r}.log")
    size = int(open(f"{out}/size_{r}").read()) / 2**20
    rows.append((str(r), save, load, size))

def median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None

rows.append(("median", *(median([row[i] for row in rows]) for i in (1, 2, 3))))
show = lambda v, digits: "n/a" if v is None else f"{v:.{digits}f}"
print(f"{binary}: GPT-2 124M, 4 ranks, ZeRO stage 3")
print("| round | save (s) | load (s) | checkpoint (MiB) |")
print("|---|---:|---:|---:|")
for name, save, load, size in rows:
    print(f"| {name} | {show(save, 2)} | {show(load, 2)} | {show(size, 0)} |")
PY
