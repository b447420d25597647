#!/usr/bin/env bash
# One AdamW step over GPT-2 124M's parameters: dtrain's flat update (one fused pass) against
# torch.optim.AdamW per tensor (foreach=False, what DeepSpeed's CPU Adam claim is made against),
# foreach, and fused, with 1 and 2 threads. The peer runs with the same thread count as shipped (no
# other setting) and tuned (dtrain's malloc settings and passive OpenMP waiters); the speed-up is
# against the faster of the two. ROUNDS rounds alternate the sides; each row is its best round's
# median. Prints a table; raw output stays in bench/out/optimizer_step/.
# Usage: bench/optimizer_step.sh [ROUNDS] [STEPS]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
steps=${2:-10}
source bench/prepare.sh optimizer_step --peers
source bench/peer_settings.sh
shapes=$out/shapes.json
for round in $(seq "$rounds"); do
  for threads in 1 2; do
    echo "round $round, $threads thread(s)..." >&2
    build/bench_optimizer_step --threads "$threads" --steps "$steps" --shapes "$shapes" >>"$out/dtrain_$threads.txt"
    env $kept_malloc $passive_wait .venv/bin/python bench/pytorch_adamw.py "$shapes" "$threads" "$steps" >>"$out/torch_tuned_$threads.txt"
    .venv/bin/python bench/pytorch_adamw.py "$shapes" "$threads" "$steps" >>"$out/torch_shipped_$threads.txt"
  done
done
/usr/bin/python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
def best(path, label):
    times = [float(m.group(1)) for line in open(path) if line.startswith(label) for m in [re.search(r"median AdamW step ([\d.]+) ms", line)]]
    return min(times)
print("| implementation | threads | as shipped (ms) | tuned (ms) | dtrain speed-up |")
print("|---|---:|---:|---:|---:|")
for threads in (1, 2):
    ours = best(f"{out}/dtrain_{threads}.txt", "")
    print(f"| dtrain, flat fused pass | {threads} | {ours:.1f} | | 1.00x |")
    for impl in ("per-tensor", "foreach", "fused"):
        shipped, tuned = best(f"{out}/torch_shipped_{threads}.txt", impl), best(f"{out}/torch_tuned_{threads}.txt", impl)
        print(f"| torch.optim.AdamW {impl} | {threads} | {shipped:.1f} | {tuned:.1f} | {min(shipped, tuned) / ours:.2f}x |")
PY
