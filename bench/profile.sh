#!/usr/bin/env bash
# Where one rank's training step spends its time: perf samples of `dtrain train` on the benchmark
# GPT (bench/gpt_bench.json), one rank with THREADS threads, after the start-up is over. Prints the
# share of samples in matrix multiplication (MKL's and oneDNN's GEMM kernels and their packing) and
# the largest other symbols. Needs perf (Debian: linux-perf).
# Usage: bench/profile.sh [STEPS] [THREADS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-12}
threads=${2:-1}
source bench/prepare.sh profile
build/dtrain train --config bench/gpt_bench.json --set train.threads="$threads" --set train.steps="$steps" \
  --set train.peak_flops=1e11 --set train.run_dir="$out/run" >"$out/train.log" 2>&1 &
pid=$!
# Sample from the first logged step on, so loading LibTorch and building the model do not count.
until grep -q "step 1/" "$out/run/rank-0.log" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { cat "$out/train.log"; exit 1; }
  sleep 0.2
done
perf record -F 499 -g -o "$out/perf.data" -p "$pid" 2>"$out/perf-record.log" &
perf_pid=$!
wait "$pid"
wait "$perf_pid" || true
perf report -i "$out/perf.data" --no-children --sort dso,symbol --stdio 2>/dev/null |
  grep -E '^ +[0-9.]+%' >"$out/symbols.txt"
/usr/bin/python3 - "$out/symbols.txt" "$threads" <<'PY'
import re, sys
rows = []
for line in open(sys.argv[1]):
    m = re.match(r"\s*([0-9.]+)%\s+(.+?)\s+\[.\]\s+(.*)", line)
    if m:
        rows.append((float(m.group(1)), m.group(2), m.group(3).strip()))
# oneDNN generates its GEMM kernels at run time: perf sees them as code of no file ("[JIT]").
gemm_symbol = re.compile(r"gemm|sgemm|brgemm|jit_avx|mkl_blas|pack", re.I)
is_gemm = lambda dso, s: dso.startswith("[JIT]") or gemm_symbol.search(s)
matmul = sum(p for p, d, s in rows if is_gemm(d, s))
print(f"| one rank, {sys.argv[2]} thread(s) | share of samples |")
print("|---|---:|")
print(f"| matrix multiplication (GEMM kernels and packing) | {matmul:.1f}% |")
for p, d, s in [r for r in rows if not is_gemm(r[1], r[2])][:10]:
    print(f"| {s[:90]} | {p:.1f}% |")
PY
