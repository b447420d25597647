#!/usr/bin/env bash
# Activation checkpointing's step-time cost on the benchmark GPT (bench/gpt_bench.json), in fp32 and
# bf16, in both layouts of bench/train.sh: one process with 2 threads (1x2), and two processes with
# one thread each running side by side (2x1, each prints its own table). Each table comes from
# build/bench_activation_checkpointing, which alternates the modes step by step in one process and
# reports each mode's step time against `none` as the median over ROUNDS rounds
# (bench/activation_checkpoint_cost.cpp says why and what a step holds). Raw output stays in bench/out/activation_cost/.
# Usage: bench/activation_cost.sh [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-15}
source bench/prepare.sh activation_cost
bench=build/bench_activation_checkpointing
for precision in fp32 bf16; do
  echo "$precision, 1x2..." >&2
  "$bench" --precision "$precision" --threads 2 --rounds "$rounds" >"$out/${precision}_1x2.txt" 2>"$out/${precision}_1x2.log"
  echo "$precision, 2x1..." >&2
  pids=()
  for rank in 0 1; do
    "$bench" --precision "$precision" --threads 1 --rounds "$rounds" >"$out/${precision}_2x1_$rank.txt" \
      2>"$out/${precision}_2x1_$rank.log" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
done
for precision in fp32 bf16; do
  for layout in 1x2 2x1_0 2x1_1; do
    echo
    echo "## $precision, ${layout/_/, process }"
    cat "$out/${precision}_$layout.txt"
  done
done
