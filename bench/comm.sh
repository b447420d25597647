#!/usr/bin/env bash
# Collective bandwidth on this machine, in one run: dtrain bench-comm on its shared-memory backend
# (the default within a node) and on Gloo, the same sweep done by OpenMPI (shared-memory transport),
# and the memory-copy bandwidth that bounds them all, for each rank count given. Prints bus bandwidth
# per op and size, and the latency of a 4 KiB all-reduce. Raw outputs stay in bench/out/comm/.
# Usage: bench/comm.sh [MAX_BYTES] [RANKS...]      (defaults: 67108864, 2 and 4 ranks)
set -euo pipefail
cd "$(dirname "$0")/.."
max_bytes=${1:-67108864}
shift || true
rank_counts=("$@")
[ ${#rank_counts[@]} -gt 0 ] || rank_counts=(2 4)
scripts/setup.sh --bench
make -s build >/dev/null
out=bench/out/comm
rm -rf "$out"
mkdir -p "$out"
gcc -O2 bench/memcpy_bandwidth.c -o "$out/memcpy_bandwidth"
mpicc -O2 bench/mpi_collectives.c -o "$out/mpi_collectives"

"$out/memcpy_bandwidth" >"$out/memcpy.txt"
for n in "${rank_counts[@]}"; do
  for backend in auto gloo; do
    echo "dtrain bench-comm --backend $backend, $n ranks..." >&2
    build/dtrain launch --nproc-per-node "$n" -- build/dtrain bench-comm --backend "$backend" -b 1024 -e "$max_bytes" \
      | sed -n 's/^\[rank 0\] //p' >"$out/dtrain-$backend-$n.txt"
  done
  echo "OpenMPI, $n ranks..." >&2
  mpirun --allow-run-as-root --oversubscribe -np "$n" "$out/mpi_collectives" 1024 "$max_bytes" 20 >"$out/openmpi-$n.txt"
done
/usr/bin/python3 bench/comm_table.py "$out" "${rank_counts[@]}"
