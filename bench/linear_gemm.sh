#!/usr/bin/env bash
# MKL's SGEMM (what at::linear and at::mm call) against oneDNN's inner product (what dtrain's fp32 linear
# layers call on the CPU, src/model/linear_gemm.h) on the linear layers of the bench model
# (bench/gpt_bench.json: d 384, MLP 1536, vocab 256, micro-batch 8 x 256 tokens), one thread: alone,
# then two processes at once as the two ranks of the speed tables run; last, the totals alone again
# under each MKL setting that selects its code path, to see whether one gives MKL what oneDNN has.
# Prints the tables.
# Usage: bench/linear_gemm.sh [REPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
reps=${1:-20}
rounds=${2:-3}
source bench/prepare.sh linear_gemm
run() { build/bench_linear_gemm --reps "$reps" --rounds "$rounds" "$@"; }
echo "one process, 1 thread:"
run
echo
echo "two processes at once, 1 thread each (the first's table; the second's is in $out/second.md):"
run >"$out/second.md" &
second=$!
run
wait "$second"
echo
echo "MKL's code-path settings, one process (totals over the 15 products, ms):"
echo "| setting | MKL SGEMM | oneDNN |"
echo "|---|---:|---:|"
for setting in "" MKL_ENABLE_INSTRUCTIONS=AVX512 MKL_CBWR=AVX512 MKL_DEBUG_CPU_TYPE=5; do
  env $setting build/bench_linear_gemm --reps "$reps" --rounds "$rounds" | awk -F'|' -v s="${setting:-as shipped}" \
    '$2 ~ /^ all $/ { printf "| %s | %.1f | %.1f |\n", s, $5, $6 }'
done
