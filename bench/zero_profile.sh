#!/usr/bin/env bash
# Where the CPU time of a ZeRO step goes, dtrain against its PyTorch peer: rank 0 of a two-rank run
# (one thread each) of the benchmark GPT (bench/gpt_bench.json), sampled by perf at 499 Hz over the
# timed steps only (from the end of the warm-up, signalled by each program's log). Prints, per
# framework, the CPU milliseconds per step of rank 0 by kind of work (samples / 499 Hz / steps), next
# to the wall time per step: what the two do differently, and how much it costs. Needs perf (Debian:
# linux-perf) and the peers (scripts/setup.sh --bench).
# Usage: bench/zero_profile.sh [STAGE] [STEPS]   (STAGE 0-3; the peer: DDP, ZeroRedundancyOptimizer,
#        FSDP2 with reshard_after_forward=False, FSDP2 fully_shard)
set -euo pipefail
cd "$(dirname "$0")/.."
stage=${1:-3}
steps=${2:-10}
warmup=3
peers=(ddp zero1 fsdp_grad_op fsdp_full)
peer=${peers[$stage]}
source bench/prepare.sh zero_profile --peers
source bench/peer_settings.sh

# profile NAME PID MARKER_FILE MARKER: records PID from the first MARKER line in MARKER_FILE until it exits.
profile() {
  local name=$1 pid=$2 file=$3 marker=$4
  until grep -q "$marker" "$file" 2>/dev/null; do
    kill -0 "$pid" 2>/dev/null || { echo "$name ended before its timed steps; see $file" >&2; exit 1; }
    sleep 0.2
  done
  # perf stops when the process it follows exits.
  perf record -F 499 -o "$out/$name.perf" -p "$pid" 2>"$out/$name.perf.log" || true
  perf report -i "$out/$name.perf" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -E '^ +[0-9.]+%' >"$out/$name.symbols"
}

echo "dtrain, ZeRO stage $stage..." >&2
build/dtrain run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json --set train.threads=1 \
  --set train.steps=$((steps + warmup)) --set zero_optimization.stage="$stage" \
  --set train.run_dir="$out/dtrain" >"$out/dtrain.log" 2>&1 &
launcher=$!
# Rank 0 is the launcher's worker whose environment says RANK=0; it exists once its log does.
until [ -s "$out/dtrain/rank-0.log" ]; do
  kill -0 "$launcher" 2>/dev/null || { cat "$out/dtrain.log" >&2; exit 1; }
  sleep 0.2
done
rank0=$(for pid in $(pgrep -P "$launcher"); do if tr '\0' '\n' <"/proc/$pid/environ" | grep -qx RANK=0; then echo "$pid"; fi; done)
profile dtrain "$rank0" "$out/dtrain/metrics.jsonl" "\"step\":$warmup,"
wait "$launcher"

echo "PyTorch $peer (tuned: dtrain's malloc settings, passive OpenMP waiters)..." >&2
port=$(free_port)
for r in 1 0; do
  env $kept_malloc $passive_wait BENCH_SAY_TIMING=1 RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port BENCH_THREADS=1 \
    BENCH_STEPS=$steps BENCH_WARMUP=$warmup BENCH_SHARDING=$peer \
    .venv/bin/python bench/pytorch_gpt.py >"$out/pytorch_$r.json" 2>"$out/pytorch_$r.log" &
done
profile pytorch $! "$out/pytorch_0.log" "timing from here"
wait  # FSDP's ranks sometimes abort while tearing Gloo down, after printing their result

/usr/bin/python3 - "$out" "$steps" "$warmup" "$peer" <<'PY'
import json, re, sys
out, steps, warmup, peer = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
kinds = [
    # oneDNN generates its GEMM kernels at run time: perf sees them as code of no file ("[JIT]").
    ("matrix multiplication (GEMM kernels, packing)", lambda d, s: d.startswith("[JIT]") or re.search(r"gemm|brgemm|jit_|mkl_blas|pack", s, re.I)),
    ("attention (fused kernel)", lambda d, s: re.search(r"flash|attention|sdpa", s, re.I)),
    ("Python interpreter", lambda d, s: d.startswith("python") or d.startswith("libpython") or re.match(r"_?Py", s)),
    ("memory copies and fills (libc)", lambda d, s: re.search(r"memcpy|memmove|memset", s)),
    ("allocator (malloc, free)", lambda d, s: re.search(r"malloc|free|_int_|arena|tcache", s) and d.startswith("libc")),
    ("kernel (page faults, syscalls, copies)", lambda d, s: d.startswith("[kernel")),
    ("other ATen and framework code (elementwise, norms, optimizer)", lambda d, s: True),
]

def profile(name):
    ms = {k: 0.0 for k, _ in kinds}
    tops = {k: [] for k, _ in kinds}
    for line in open(f"{out}/{name}.symbols"):
        m = re.match(r"\s*([0-9.]+)%\s+(.+?)\s+\[(.)\]\s+(.*)", line)
        if not m:
            continue
        pct, dso, _, sym = float(m.group(1)), m.group(2), m.group(3), m.group(4).strip()
        for k, match in kinds:
            if match(dso, sym):
                ms[k] += pct
                tops[k].append((pct, sym))
                break
    return ms, tops

def cpu_ms_per_step(name):
    # perf's own count: "[ perf record: Captured and wrote ... (N samples) ]"
    text = open(f"{out}/{name}.perf.log").read()
    m = re.search(r"\((\d+) samples\)", text)
    return int(m.group(1)) / 499 * 1000 / steps if m else float("nan")

timed = [json.loads(l) for l in open(f"{out}/dtrain/metrics.jsonl") if '"loss"' in l and json.loads(l)["step"] > warmup]
dtrain_wall = 1000 * sum(s["step_s"] for s in timed) / len(timed)
peer_wall = 1000 * json.loads(open(f"{out}/pytorch_0.json").readline())["step_s"]
rows = {}
for name in ("dtrain", "pytorch"):
    shares, tops = profile(name)
    rows[name] = (cpu_ms_per_step(name), shares, tops)
print(f"| rank 0, 1 thread | dtrain ms/step | PyTorch {peer} ms/step | difference (ms) | largest symbols (PyTorch) |")
print("|---|---:|---:|---:|---|")
print(f"| wall time per step | {dtrain_wall:.0f} | {peer_wall:.0f} | {peer_wall - dtrain_wall:+.0f} | |")
print(f"| CPU time per step (all threads, perf) | {rows['dtrain'][0]:.0f} | {rows['pytorch'][0]:.0f} | {rows['pytorch'][0] - rows['dtrain'][0]:+.0f} | |")
for k, _ in kinds:
    d = rows["dtrain"][0] * rows["dtrain"][1][k] / 100
    p = rows["pytorch"][0] * rows["pytorch"][1][k] / 100
    top = ", ".join(f"{s[:40]} {pc:.1f}%" for pc, s in sorted(rows["pytorch"][2][k], reverse=True)[:2])
    print(f"| {k} | {d:.0f} | {p:.0f} | {p - d:+.0f} | {top} |")
PY
