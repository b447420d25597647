#!/usr/bin/env bash
# Causal bf16 attention on the CPU: ATen's flash kernel against dtrain's (bench/attention_kernel.cpp),
# forward and forward + backward, on the bench model's shape and longer sequences, ROUNDS alternating
# rounds at THREADS threads. Prints the CPU, its flags and the table; the table stays in
# bench/out/attention_kernel/.
# Usage: bench/attention_kernel.sh [ROUNDS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
threads=${2:-2}
source bench/prepare.sh attention_kernel
date -u
lscpu | sed -n 's/^Model name: *//p'
grep -o -w 'avx2\|fma\|avx512f\|avx512bw\|avx512_vnni\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
build/bench_attention_kernel --threads "$threads" --rounds "$rounds" | tee "$out/table.md"
