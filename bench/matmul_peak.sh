#!/usr/bin/env bash
# How far apart repeated start-up matmul probes land on this machine (the peak MFU is reported
# against, src/train/matmul_peak.h), fp32 and bf16, at 1 and 2 threads, REPEATS probes each. Prints
# the tables and the CPU they were measured on.
# Usage: bench/matmul_peak.sh [REPEATS]
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${1:-8}
source bench/prepare.sh matmul_peak
lscpu | sed -n 's/^Model name: *//p'
grep -o -w 'avx2\|fma\|avx512f\|avx512bw\|avx512_vnni\|avx512_bf16\|amx_bf16' /proc/cpuinfo | sort -u | tr '\n' ' '
echo
for threads in 1 2; do
  build/bench_matmul_peak --repeats "$repeats" --threads "$threads" | tee "$out/threads_$threads.md"
done
