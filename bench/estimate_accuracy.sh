#!/usr/bin/env bash
# The memory estimate against measurement, beside DeepSpeed's and Accelerate's estimators: each layout
# below trains STEPS steps on 2 ranks of this machine for GPT-2 124M and the llama-1b preset (short
# sequences, so the runs stay minutes), and its `memory` line (the estimate for its own config, the
# counting allocator's peak tensor bytes and peak RSS per rank, as shipped and with malloc giving large
# blocks back) is printed beside what
# bench/estimate_peers.py says DeepSpeed's ZeRO-2/ZeRO-3 estimators and Accelerate's estimate-memory
# give for the same model (where they have a number for that layout). A layout whose estimate does
# not fit 85% of this host's available memory is not run, and its row says so. Prints a table
# (docs/benchmarks.md, "Memory estimate against measurement"); raw logs stay in bench/out/estimate_accuracy/,
# the NVMe rows' files in bench/out/estimate_accuracy/nvme.
# Usage: bench/estimate_accuracy.sh [STEPS] [MODELS...]   (MODELS: gpt2-124m llama-1b, the default both)
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-2}
shift || true
models=("${@:-gpt2-124m}")
if [ $# -eq 0 ]; then models=(gpt2-124m llama-1b); fi
source bench/prepare.sh estimate_accuracy --peers
# name|sets: the layouts of 2 ranks the estimate covers, one row each.
layouts=(
  "DDP|zero_optimization.stage=0"
  "ZeRO-1|zero_optimization.stage=1"
  "ZeRO-2|zero_optimization.stage=2"
  "ZeRO-3|zero_optimization.stage=3"
  "ZeRO-1, AC selective|zero_optimization.stage=1 train.activation_checkpointing=selective"
  "ZeRO-3, AC full|zero_optimization.stage=3 train.activation_checkpointing=full"
  "ZeRO-2, bf16|zero_optimization.stage=2 bf16.enabled=true"
  "ZeRO-3, bf16|zero_optimization.stage=3 bf16.enabled=true"
  "tp 2|parallel.tp=2"
  "tp 2 + sp|parallel.tp=2 parallel.sequence_parallel=true"
  "pp 2, 1f1b, 4 micro-batches|parallel.pp=2 parallel.pipeline.schedule=1f1b gradient_accumulation_steps=4 train_batch_size=auto"
  "cp 2|parallel.cp=2"
  "ZeRO-3, optimizer on NVMe|zero_optimization.stage=3 zero_optimization.offload_optimizer={\"device\":\"nvme\",\"nvme_path\":\"NVME\"}"
  "ZeRO-3, optimizer and parameters on NVMe|zero_optimization.stage=3 zero_optimization.offload_optimizer={\"device\":\"nvme\",\"nvme_path\":\"NVME\"} zero_optimization.offload_param={\"device\":\"nvme\",\"nvme_path\":\"NVME\"}"
)
mkdir -p "$out/nvme"
available=$(($(awk '/MemAvailable/ {print $2}' /proc/meminfo) * 1024))
for model in "${models[@]}"; do
  # DeepSpeed prints its accelerator warning on stdout: the JSON is the last line.
  .venv/bin/python bench/estimate_peers.py "$model" 2 2>/dev/null | tail -n 1 >"$out/${model}_peers.json"
  for i in "${!layouts[@]}"; do
    IFS='|' read -r name sets <<<"${layouts[$i]}"
    base=(--set model.preset="$model" --set model.seq_len=256 --set train_micro_batch_size_per_gpu=1 --set train_batch_size=auto)
    for s in $sets; do base+=(--set "${s//NVME/$out/nvme}"); done
    build/dtrain estimate --world-size 2 "${base[@]}" --json >"$out/${model}_$i.estimate.json" 2>"$out/${model}_$i.estimate.err" || true
    node=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("node_bytes", 0))' "$out/${model}_$i.estimate.json" 2>/dev/null || echo 0)
    if /usr/bin/python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) > 0.85 * float(sys.argv[2]) else 1)' "$node" "$available"; then
      echo "$model, $name: estimated $((${node%.*} >> 20)) MiB for the node, more than 85% of the $((available >> 20)) MiB available: not run" >&2
      continue
    fi
    echo "$model, $name..." >&2
    # Once as shipped, once with glibc giving blocks of 128 KiB and more back to the kernel when freed
    # (dtrain keeps what it frees for speed, docs/training.md "Host memory"): the RSS without malloc's
    # retained heap. Tensors are the same bytes either way.
    for malloc in shipped given_back; do
      env $([ $malloc = given_back ] && echo MALLOC_MMAP_THRESHOLD_=131072) build/dtrain run --nproc-per-node 2 --no-sample "${base[@]}" \
        --set train.steps="$steps" --set train.eval_every=0 --set checkpoint.save_at_end=false \
        --set train.run_dir="$out/${model}_${i}_$malloc" >"$out/${model}_${i}_$malloc.log" 2>&1 ||
        echo "$model, $name: the run failed, see $out/${model}_${i}_$malloc.log" >&2
    done
  done
done
printf '%s\n' "${layouts[@]}" >"$out/layouts.txt"
/usr/bin/python3 - "$out" "$available" "${models[@]}" <<'PY'
import json, os, sys
out, available, models = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
layouts = [l.split("|") for l in open(f"{out}/layouts.txt").read().splitlines()]
MiB = 1 << 20
runtime = 140 * MiB  # the estimate's runtime term on the CPU build, compared with peak RSS
def err(estimated, measured):
    return f"{100 * (measured - estimated) / estimated:+.1f}%"
def memory_of(run):
    path = f"{out}/{run}/metrics.jsonl"
    memory = None
    if os.path.exists(path):
        for line in open(path):
            j = json.loads(line)
            if "memory" in j:
                memory = j["memory"]
    # The most loaded rank, as the peers' one number per GPU means.
    return max(memory["ranks"], key=lambda r: r["measured_peak_bytes"]) if memory and "ranks" in memory else None
def steps_rss(rank):
    return rank.get("steps_peak_rss_bytes", rank["peak_rss_bytes"])  # from the first step on, as the tensors are
print("| model | layout | dtrain estimate, tensors (MiB) | measured peak tensors (MiB) | error | estimate + runtime (MiB) | "
      "peak RSS of the steps, as shipped (MiB) | error | peak RSS, large blocks given back (MiB) | error | DeepSpeed (MiB) | error | Accelerate (MiB) | error |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for model in models:
    peers = json.load(open(f"{out}/{model}_peers.json"))
    for i, (name, sets) in enumerate(layouts):
        estimate = json.load(open(f"{out}/{model}_{i}.estimate.json")) if os.path.getsize(f"{out}/{model}_{i}.estimate.json") else {}
        # DeepSpeed's estimators split GPU and CPU memory, which are one memory on the CPU build: no
        # number of theirs stands for an offloaded row here.
        offloaded = "offload_" in sets
        stage = None if offloaded else "zero_optimization.stage=2" in sets and "deepspeed_zero2" or "zero_optimization.stage=3" in sets and "deepspeed_zero3" or None
        acc_key = None if "zero_optimization.stage=0" not in sets else "accelerate_bfloat16" if "bf16.enabled=true" in sets else "accelerate_float32"
        shipped, given_back = memory_of(f"{model}_{i}_shipped"), memory_of(f"{model}_{i}_given_back")
        if shipped is None:
            if "no_estimate" in estimate or "ranks" not in estimate:
                print(f"| {model} | {name} | {estimate.get('no_estimate', 'no estimate')} |||||||||||")
                continue
            est = max(r["tensor_bytes"] for r in estimate["ranks"])
            why = (f"not run: {estimate['node_bytes'] / MiB:.0f} MiB per node estimated, {available / MiB:.0f} available"
                   if estimate.get("node_bytes", 0) > 0.85 * available else "the run failed")
            ds = f"{peers[stage] / MiB:.0f} | -" if stage else "- | -"
            acc = f"{peers[acc_key] / MiB:.0f} | -" if acc_key else "- | -"
            print(f"| {model} | {name} | {est / MiB:.1f} | {why} | | {(est + runtime) / MiB:.0f} | | | | | {ds} | {acc} |")
            continue
        est, meas = shipped["estimated_bytes"], shipped["measured_peak_bytes"]
        back = f"{steps_rss(given_back) / MiB:.0f} | {err(est + runtime, steps_rss(given_back))}" if given_back else "- | -"
        ds = f"{peers[stage] / MiB:.0f} | {err(peers[stage], meas)}" if stage else "- | -"
        acc = f"{peers[acc_key] / MiB:.0f} | {err(peers[acc_key], meas)}" if acc_key else "- | -"
        print(f"| {model} | {name} | {est / MiB:.1f} | {meas / MiB:.1f} | {err(est, meas)} | {(est + runtime) / MiB:.0f} | "
              f"{steps_rss(shipped) / MiB:.0f} | {err(est + runtime, steps_rss(shipped))} | {back} | {ds} | {acc} |")
PY
