#!/usr/bin/env bash
# Activation memory per rank under tensor parallelism, measured, beside Korthikanti et al.'s formulas
# ("Reducing Activation Recomputation in Large Transformer Models", 2022), per layer in bytes:
#   no parallelism  sbh(34 + 5as/h)
#   tp              sbh(10 + 24/t + 5as/(ht))
#   tp + SP         sbh(34 + 5as/h)/t
# and the same count under dtrain's assumptions. The benchmark GPT (bench/gpt_bench.json: fp32,
# 6 layers, s = 256, h = 384, a = 6) on two ranks of one thread: dp 2 (t = 1), tp 2 and tp 2 + SP,
# dtrain and the PyTorch DTensor peer (bench/pytorch_tensor_parallel.py, tuned: dtrain's malloc
# settings and passive OpenMP waiters), each at micro-batches 2 and 8. Activations grow with the
# micro-batch and nothing else here does, so the measured activations of micro-batch 8 are each
# rank's peak RSS difference between the two, times 8/6. That also counts what backward holds at the
# peak besides the kept activations (activation gradients, communication buffers); dtrain runs once
# more with full activation checkpointing, which keeps only each block's input (s·b·h per layer,
# split under SP) and at its peak holds one recomputed block's activations besides backward's
# working set: the growth without checkpointing, less the growth with it, plus those inputs and
# that one block (by the count under dtrain's assumptions), is the activations kept, the quantity
# the formulas count. ROUNDS rounds run one after
# another; each cell is the median. Prints a table; raw logs stay in bench/out/tensor_parallel_memory/.
# A second table makes the same subtraction for dtrain from its counting allocator's peak tensor
# bytes (metrics.jsonl's "memory" line), exact and the same from run to run, beside its own
# estimate's peak (the formulas of `dtrain estimate`).
# Usage: bench/tensor_parallel_memory.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-3}
rounds=${2:-1}
source bench/prepare.sh tensor_parallel_memory --peers
source bench/peer_settings.sh
declare -A dtrain_layout=([dp]="" [tp]="--set parallel.tp=2" [tp_sp]="--set parallel.tp=2 --set parallel.sequence_parallel=true")
for ((round = 1; round <= rounds; round++)); do
  for layout in dp tp tp_sp; do
    for micro in 2 8; do
      name=${layout}_b${micro}_$round
      echo "round $round: $layout, micro-batch $micro: dtrain..." >&2
      for ac in none full; do
        # shellcheck disable=SC2086 # the layout's --set pairs split into words
        build/dtrain run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json --set train.threads=1 \
          --set train.steps="$steps" --set train_micro_batch_size_per_gpu=$micro ${dtrain_layout[$layout]} \
          --set train.activation_checkpointing=$ac --set train.run_dir="$out/dtrain_${ac}_$name" >"$out/dtrain_${ac}_$name.log" 2>&1
      done
      echo "round $round: $layout, micro-batch $micro: PyTorch..." >&2
      # shellcheck disable=SC2086,SC2154 # the settings (bench/peer_settings.sh) split into VAR=VALUE words
      run_peer 2 1 bench/pytorch_tensor_parallel.py "$out/pytorch_$name.json" "$out/pytorch_$name" $kept_malloc $passive_wait \
        BENCH_STEPS="$steps" BENCH_WARMUP=1 BENCH_PROFILE_STEPS=1 BENCH_LAYOUT="$layout" BENCH_MICRO="$micro"
    done
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import glob, json, re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
config = json.load(open("bench/gpt_bench.json"))
m = config["model"]
s, h, a, layers, b = m["seq_len"], m["d_model"], m["n_head"], m["n_layer"], 8
t = 2
sbh = s * b * h
MiB = 2**20
# Korthikanti et al., per layer, bytes: 16-bit activations, a 1-byte dropout mask after attention's
# softmax and after each sub-layer, attention scores and softmax stored (the 5as/h term).
paper = {"dp": sbh * (34 + 5 * a * s / h), "tp": sbh * (10 + 24 / t + 5 * a * s / (h * t)), "tp_sp": sbh * (34 + 5 * a * s / h) / t}
# The same count under dtrain's assumptions: fp32 (4 bytes, the paper's 2), no dropout (its masks
# gone), fused flash attention (no scores: the 5as/h term gone). Per layer that leaves, in tensors
# of s·b·h elements, 4 replicated over tp (both norms' inputs and outputs; split under SP) and 12
# split (q, k, v, the attention output, GELU's input and output at 4h each).
ours = {"dp": 4 * sbh * 16, "tp": 4 * sbh * (4 + 12 / t), "tp_sp": 4 * sbh * 16 / t}


def dtrain_rss(layout, micro, r, ac="none"):
    return [int(re.search(r"peak RSS (\d+) MiB", open(p).read()).group(1))
            for p in sorted(glob.glob(f"{out}/dtrain_{ac}_{layout}_b{micro}_{r}/rank-*.log"))]


def dtrain_memory_line(layout, micro, r, ac):
    for line in open(f"{out}/dtrain_{ac}_{layout}_b{micro}_{r}/metrics.jsonl"):
        if '"memory"' in line:
            return sorted(json.loads(line)["memory"]["ranks"], key=lambda rank: rank["rank"])
    return None


def dtrain_tensors(layout, micro, r, ac="none"):
    """Per rank, the counting allocator's peak tensor bytes during the steps, MiB."""
    ranks = dtrain_memory_line(layout, micro, r, ac)
    return [rank["measured_peak_bytes"] / MiB for rank in ranks] if ranks else None


def dtrain_estimated(layout, micro, r, ac="none"):
    ranks = dtrain_memory_line(layout, micro, r, ac)
    return [rank["estimated_bytes"] / MiB for rank in ranks] if ranks else None


def growth(rss, layout):
    """Per rank, the peak that micro-batch 8 adds over 2, scaled to all 8 sequences; None without runs."""
    try:
        small = median_per_rank(rss(layout, 2, r) for r in range(1, rounds + 1))
        large = median_per_rank(rss(layout, 8, r) for r in range(1, rounds + 1))
    except (FileNotFoundError, AttributeError):
        return None, None, None
    if not small or not large:
        return None, None, None
    return small, large, [(y - x) * 8 / 6 for x, y in zip(small, large)]


def pytorch_rss(layout, micro, r):
    lines = [l for l in open(f"{out}/pytorch_{layout}_b{micro}_{r}.json") if l.startswith("{")]
    return [round(x) for x in json.loads(lines[-1])["peak_rss_mib"]] if lines else None


def median_per_rank(runs):
    runs = [x for x in runs if x]
    return [statistics.median(col) for col in zip(*runs)] if runs else None


print(f"model: {layers} layers, s={s}, b={b}, h={h}, a={a}, t={t}; activations of micro-batch {b} per rank, whole model, MiB")
def cells(values, fmt="{:.0f}"):
    return "/".join(fmt.format(x) for x in values) if values else ""


LAYOUTS = (("dp", "dp 2 (t = 1)"), ("tp", "tp 2"), ("tp_sp", "tp 2 + SP"))


def kept_activations(layout, measured, recompute):
    """Per rank, the activations kept: the growth without checkpointing less the growth with full
    recompute, plus the blocks' inputs full recompute keeps and the one block it holds again at its
    peak (one layer of the count under dtrain's assumptions)."""
    checkpoints = layers * 4 * sbh / (t if layout == "tp_sp" else 1) / MiB
    recomputed = ours[layout] / MiB
    return [x - y + checkpoints + recomputed for x, y in zip(measured, recompute)]


print("| layout | framework | peak RSS b=2 (MiB) | peak RSS b=8 (MiB) | grows with the batch (MiB) | grows, with full recompute (MiB) | "
      "activations kept (MiB) | Korthikanti et al. (MiB) | under dtrain's assumptions (MiB) | kept / dtrain's assumptions |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for layout, label in LAYOUTS:
    formula, adjusted = layers * paper[layout] / MiB, layers * ours[layout] / MiB
    for framework, rss in (("dtrain", dtrain_rss), ("PyTorch", pytorch_rss)):
        small, large, measured = growth(rss, layout)
        if not measured:
            print(f"| {label} | {framework} | no run | | | | | {formula:.0f} | {adjusted:.0f} | |")
            continue
        kept = None
        if framework == "dtrain":
            _, _, recompute = growth(lambda *k: dtrain_rss(*k, ac="full"), layout)
            kept = kept_activations(layout, measured, recompute) if recompute else None
        print(f"| {label} | {framework} | {cells(small)} | {cells(large)} | {cells(measured)} | "
              f"{cells(recompute) if kept else ''} | {cells(kept)} | {formula:.0f} | {adjusted:.0f} | "
              f"{cells([x / adjusted for x in kept], '{:.2f}') if kept else ''} |")

print()
print("dtrain's tracked tensor bytes (the counting allocator's peak during the steps; its estimate's peak beside it), MiB")
print("| layout | peak tensors b=2 | peak tensors b=8 | estimated b=8 | grows with the batch | grows, with full recompute | "
      "activations kept | under dtrain's assumptions | kept / dtrain's assumptions |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
for layout, label in LAYOUTS:
    adjusted = layers * ours[layout] / MiB
    small, large, measured = growth(dtrain_tensors, layout)
    _, _, recompute = growth(lambda *k: dtrain_tensors(*k, ac="full"), layout)
    if not measured or not recompute:
        print(f"| {label} | no run | | | | | | {adjusted:.0f} | |")
        continue
    estimated = median_per_rank(dtrain_estimated(layout, 8, r) for r in range(1, rounds + 1))
    kept = kept_activations(layout, measured, recompute)
    print(f"| {label} | {cells(small, '{:.1f}')} | {cells(large, '{:.1f}')} | {cells(estimated, '{:.1f}')} | {cells(measured, '{:.1f}')} | "
          f"{cells(recompute, '{:.1f}')} | {cells(kept, '{:.1f}')} | {adjusted:.0f} | {cells([x / adjusted for x in kept], '{:.3f}')} |")
PY
