#!/usr/bin/env bash
# Moving a sharded checkpoint somewhere else, dtrain against its peers, on GPT-2 124M (1024 positions,
# tied, fp32 with AdamW) saved after one step by 2 ranks at ZeRO stage 3 in each framework:
#   dtrain export          `dtrain export --format hf --dtype fp32`: the model, to Hugging Face safetensors;
#   dtrain resume          the same checkpoint resumed by 1 rank and by 4 (ZeRO-3): the model and the
#                          optimizer state resharded while loading (the run's "load X s" line);
#   DeepSpeed zero_to_fp32 the model, gathered to one fp32 file (the script each checkpoint carries);
#   DeepSpeed ds_to_universal  model and optimizer state to the universal layout any world size loads
#                          (a second step, loading that into a run, is not timed);
#   PyTorch dcp_to_torch_save (format_utils dcp_to_torch)  FSDP2's distributed checkpoint, model and optimizer state, to one
#                          torch.save file.
# Each command is timed alone with GNU time (wall seconds, peak RSS of the process and its children);
# the peers' checkpoints come from bench/pytorch_checkpoint_save.py. Runs ROUNDS rounds in turn and
# prints each row's best time and its peak RSS; raw logs in bench/out/checkpoint_convert/.
# Usage: bench/checkpoint_convert.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-2}
source bench/prepare.sh checkpoint_convert --peers
source bench/peer_settings.sh
out=$(realpath "$out")
export DS_ACCELERATOR=cpu OMP_NUM_THREADS=1
model=(--no-sample --set model.preset=gpt2-124m --set train_micro_batch_size_per_gpu=1 --set train.eval_every=0)

echo "dtrain: one step of GPT-2 124M on 2 ranks at ZeRO-3, then a checkpoint..." >&2
build/dtrain run --nproc-per-node 2 "${model[@]}" --set train_batch_size=4 --set zero_optimization.stage=3 \
  --set train.steps=1 --set train.run_dir="$out/dtrain" >"$out/dtrain_save.log" 2>&1 || { tail "$out/dtrain_save.log" >&2; exit 1; }
step=$out/dtrain/ckpt/step-00000001
for framework in ds_zero3 fsdp; do
  echo "$framework: one step of GPT-2 124M on 2 ranks, then a checkpoint..." >&2
  run_peer 2 1 bench/pytorch_checkpoint_save.py "$out/$framework.json" "$out/$framework" \
    BENCH_FRAMEWORK=$framework BENCH_CHECKPOINT="$out/$framework"
done
[ -f "$out/ds_zero3/latest" ] && [ -f "$out/fsdp/.metadata" ] || { echo "a peer's checkpoint is missing (see $out/*.err)" >&2; exit 1; }

# timed NAME ROUND COMMAND...: one timed run, "seconds KB" in $out/NAME_ROUND.time, its output beside.
timed() {
  local name=$1 round=$2
  shift 2
  /usr/bin/time -f "%e %M" -o "$out/${name}_$round.time" "$@" >"$out/${name}_$round.log" 2>&1 ||
    { tail "$out/${name}_$round.log" >&2; exit 1; }
}
for ((round = 1; round <= rounds; round++)); do
  echo "round $round of $rounds..." >&2
  rm -rf "$out/hf" "$out/ds_fp32" "$out/ds_universal" "$out/dcp.pt"
  timed dtrain_export "$round" build/dtrain export --checkpoint "$step" --format hf --dtype fp32 --out "$out/hf"
  for ranks in 1 4; do
    rm -rf "$out/resume_$ranks" && mkdir -p "$out/resume_$ranks/ckpt" && cp -r "$step" "$out/resume_$ranks/ckpt/"
    timed "dtrain_resume_$ranks" "$round" build/dtrain run --nproc-per-node $ranks "${model[@]}" --set train_batch_size=4 \
      --set zero_optimization.stage=3 --set train.steps=2 --set checkpoint.save_at_end=false --set train.run_dir="$out/resume_$ranks"
  done
  timed zero_to_fp32 "$round" .venv/bin/python "$out/ds_zero3/zero_to_fp32.py" "$out/ds_zero3" "$out/ds_fp32"
  timed ds_to_universal "$round" .venv/bin/python -m deepspeed.checkpoint.ds_to_universal \
    --input_folder "$out/ds_zero3/global_step1" --output_folder "$out/ds_universal"
  timed dcp_to_torch_save "$round" .venv/bin/python -m torch.distributed.checkpoint.format_utils dcp_to_torch \
    "$out/fsdp" "$out/dcp.pt"
done

/usr/bin/python3 - "$out" "$rounds" <<'PY'
import glob, re, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = [("dtrain export --format hf (model, fp32)", "dtrain_export"),
        ("dtrain resume on 1 rank (model + optimizer, resharded)", "dtrain_resume_1"),
        ("dtrain resume on 4 ranks at ZeRO-3 (model + optimizer, resharded)", "dtrain_resume_4"),
        ("DeepSpeed zero_to_fp32 (model, fp32)", "zero_to_fp32"),
        ("DeepSpeed ds_to_universal (model + optimizer)", "ds_to_universal"),
        ("PyTorch dcp_to_torch_save (model + optimizer)", "dcp_to_torch_save")]
print("GPT-2 124M, checkpoint saved by 2 ranks at ZeRO stage 3 (FSDP2 for the DCP row); best of", rounds, "round(s)")
print("| what | wall (s) | load (s) | peak RSS (MiB) |")
print("|---|---:|---:|---:|")
for label, name in rows:
    runs = []
    for r in range(1, rounds + 1):
        wall, kb = open(f"{out}/{name}_{r}.time").read().split()[-2:]
        m = re.search(r"load ([\d.]+) s", open(f"{out}/{name}_{r}.log").read())
        runs.append((float(wall), float(m.group(1)) if m else None, int(kb) / 1024))
    wall, load, rss = min(runs)
    print(f"| {label} | {wall:.2f} | {'' if load is None else f'{load:.2f}'} | {max(r[2] for r in runs):.0f} |")
PY
