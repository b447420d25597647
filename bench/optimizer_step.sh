#!/usr/bin/env bash
# One AdamW step over GPT-2 124M's parameters: dtrain's flat update (one fused pass per run of the
# buffer) against torch.optim.AdamW per tensor (foreach=False, what DeepSpeed's CPU Adam claim is
# made against), foreach, and fused, with 1 and 2 threads. The peer runs as shipped (PyTorch's own
# thread count) and tuned (dtrain's thread count, passive OpenMP waiters, dtrain's malloc settings).
# ROUNDS rounds alternate the two sides; each row is its best round's median. Prints a table; raw
# output stays in bench/out/optimizer_step/.
# Usage: bench/optimizer_step.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-10}
make -s build >/dev/null
scripts/setup.sh --bench >/dev/null
source bench/peer_settings.sh
out=bench/out/optimizer_step
rm -rf "$out"
mkdir -p "$out"
shapes=$out/shapes.json
for round in $(seq "$rounds"); do
  for threads in 1 2; do
    echo "round $round, $threads thread(s)..." >&2
    build/bench_optimizer_step --threads "$threads" --steps "$steps" --shapes "$shapes" >>"$out/dtrain_$threads.txt"
    env $kept_malloc $passive_wait .venv/bin/python bench/pytorch_adamw.py "$shapes" "$threads" "$steps" >>"$out/torch_tuned_$threads.txt"
  done
  .venv/bin/python bench/pytorch_adamw.py "$shapes" 0 "$steps" >>"$out/torch_shipped.txt"
done
/usr/bin/python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
def best(path, label):
    times = [float(m.group(1)) for line in open(path) if line.startswith(label) for m in [re.search(r"median AdamW step ([\d.]+) ms", line)]]
    return min(times)
print("| implementation | threads | AdamW step (ms) | dtrain speed-up |")
print("|---|---:|---:|---:|")
for threads in (1, 2):
    ours = best(f"{out}/dtrain_{threads}.txt", "")
    print(f"| dtrain, flat fused pass | {threads} | {ours:.1f} | 1.00x |")
    for impl in ("per-tensor", "foreach", "fused"):
        peer = best(f"{out}/torch_tuned_{threads}.txt", impl)
        print(f"| torch.optim.AdamW {impl}, tuned | {threads} | {peer:.1f} | {peer / ours:.2f}x |")
shipped_threads = re.search(r"\((\d+) thread", open(f"{out}/torch_shipped.txt").readline()).group(1)
for impl in ("per-tensor", "foreach", "fused"):
    print(f"| torch.optim.AdamW {impl}, as shipped | {shipped_threads} | {best(f'{out}/torch_shipped.txt', impl):.1f} | |")
PY
