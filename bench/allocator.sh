#!/usr/bin/env bash
# Host memory strategies for dtrain's training step, side by side on the benchmark GPT
# (bench/gpt_bench.json), one rank with 2 threads: glibc malloc as it ships
# (DTRAIN_GLIBC_MALLOC_DEFAULTS=1), glibc told to keep freed memory with the tensors' large blocks in
# the heap too (DTRAIN_HOST_BLOCK_CACHE=0), what dtrain does by default (glibc keeping freed memory,
# the tensors' blocks of 256 KiB and more mapped on their own and reused by length,
# src/train/host_memory.h and host_block_cache.h), glibc giving every block of 128 KiB and more back
# when freed (MALLOC_MMAP_THRESHOLD_=131072), and jemalloc and mimalloc from Debian through
# LD_PRELOAD. Prints tokens/s, peak RSS and minor page faults per strategy; each runs ROUNDS times,
# interleaved, and the table shows the best tokens/s. With RANKS 2, two ranks of one thread each
# train under ZeRO-2 instead (`dtrain run`), whose gather and send buffers come and go every step;
# the table gives rank 0's figures.
# Usage: bench/allocator.sh [STEPS] [ROUNDS] [RANKS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-15}
rounds=${2:-2}
ranks=${3:-1}
if [ "$ranks" = 1 ]; then
  launch=(build/dtrain train --set train.threads=2)
else
  launch=(build/dtrain run --nproc-per-node "$ranks" --no-sample --set train.threads=1 --set zero_optimization.stage=2)
fi
warmup=3
source bench/prepare.sh allocator
lib=/usr/lib/x86_64-linux-gnu
declare -A env_of=(
  [glibc]="DTRAIN_GLIBC_MALLOC_DEFAULTS=1"
  [glibc-kept-heap-only]="DTRAIN_HOST_BLOCK_CACHE=0"
  [dtrain-default]=""
  [glibc-given-back]="MALLOC_MMAP_THRESHOLD_=131072"
  [jemalloc]="LD_PRELOAD=$lib/libjemalloc.so.2"
  [mimalloc]="LD_PRELOAD=$lib/libmimalloc.so.2"
)
order=(glibc glibc-kept-heap-only dtrain-default glibc-given-back jemalloc mimalloc)
for name in "${order[@]}"; do
  [[ $name == jemalloc && ! -e $lib/libjemalloc.so.2 ]] && { echo "skipping jemalloc (apt install libjemalloc2)" >&2; continue; }
  [[ $name == mimalloc && ! -e $lib/libmimalloc.so.2 ]] && { echo "skipping mimalloc (apt install libmimalloc2.0)" >&2; continue; }
  : >"$out/$name.txt"
done
for ((round = 1; round <= rounds; round++)); do
  for name in "${order[@]}"; do
    [[ -e "$out/$name.txt" ]] || continue
    echo "round $round: $name..." >&2
    run="$out/$name-$round"
    env ${env_of[$name]} "${launch[@]}" --config bench/gpt_bench.json \
      --set train.steps=$((steps + warmup)) --set train.run_dir="$run" >"$run.log" 2>&1
    /usr/bin/python3 - "$run" "$warmup" >>"$out/$name.txt" <<'PY'
import json, re, sys
run, warmup = sys.argv[1], int(sys.argv[2])
steps = [json.loads(l) for l in open(f"{run}/metrics.jsonl") if '"loss"' in l and json.loads(l)["step"] > warmup]
tokens = steps[0]["tokens_per_s"] * steps[0]["step_s"] * len(steps)
log = open(f"{run}/rank-0.log").read()
rss, faults = re.search(r"peak RSS (\d+) MiB, (\d+) page faults", log).groups()
print(tokens / sum(s["step_s"] for s in steps), rss, faults)
PY
  done
done
echo "| host memory | tokens/s (best of $rounds) | peak RSS (MiB) | minor page faults |"
echo "|---|---:|---:|---:|"
for name in "${order[@]}"; do
  [[ -e "$out/$name.txt" ]] || continue
  sort -gr "$out/$name.txt" | head -1 | awk -v n="$name" '{printf "| %s | %.0f | %d | %d |\n", n, $1, $2, $3}'
done
