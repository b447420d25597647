#!/usr/bin/env bash
# The longest sequence that trains within a memory cap per rank under context parallelism, and the
# activation memory per rank beside the count under dtrain's assumptions. A Llama-shaped bench model
# (bench/llama_bench.json: RoPE, so nothing in the model grows with the sequence but the activations;
# 6 layers, 6 heads, 2 kv heads, d 384, fp32, micro-batch 1), 2 steps per run, one thread per rank, at
# cp 1, cp 2 and cp 4 with ring attention and cp 2 with Ulysses: model.seq_len doubles until a run goes
# over CAP_MIB of peak RSS on some rank, then probes narrow it to one unit of 2·cp·64 tokens
# (bench/context_parallel_memory.py says how, and how the activations are measured and counted: two
# more runs per layout with full activation checkpointing tell the kept activations from backward's
# working set). cp 4 puts 4 ranks on the machine's cores: slow, but it measures memory, not speed.
# Prints the tables; raw logs stay in bench/out/context_parallel_memory/.
# Usage: bench/context_parallel_memory.sh [CAP_MIB] [LAYOUT...]   (default 1536; layouts: cp1 cp2_ring cp4_ring cp2_ulysses)
set -euo pipefail
cd "$(dirname "$0")/.."
cap=${1:-1536}
shift || true
source bench/prepare.sh context_parallel_memory
/usr/bin/python3 bench/context_parallel_memory.py search "$out" "$cap" "$@"
/usr/bin/python3 bench/context_parallel_memory.py recompute "$out"
/usr/bin/python3 bench/context_parallel_memory.py table "$out" "$cap" | tee "$out/table.md"
