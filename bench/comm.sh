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
source bench/prepare.sh comm --peers
gcc -O2 bench/memcpy_bandwidth.c -o "$out/memcpy_bandwidth"
mpicc -O2 bench/mpi_collectives.c -o "$out/mpi_collectives"

# Two passes per program: messages up to 1 MiB take microseconds, so 200 iterations average out the
# machine's noise; from 4 MiB up 20 suffice and keep the Gloo sweep short.
passes=("1024 $((max_bytes < 1048576 ? max_bytes : 1048576)) 200")
[ "$max_bytes" -lt 4194304 ] || passes+=("4194304 $max_bytes 20")

"$out/memcpy_bandwidth" >"$out/memcpy.txt"
for n in "${rank_counts[@]}"; do
  for pass in "${passes[@]}"; do
    read -r lo hi iters <<<"$pass"
    for backend in auto gloo; do
      echo "dtrain bench-comm --backend $backend, $n ranks, $lo..$hi bytes x $iters..." >&2
      build/dtrain launch --nproc-per-node "$n" -- build/dtrain bench-comm --backend "$backend" -b "$lo" -e "$hi" -n "$iters" \
        | sed -n 's/^\[rank 0\] //p' >>"$out/dtrain-$backend-$n.txt"
    done
    echo "OpenMPI, $n ranks, $lo..$hi bytes x $iters..." >&2
    mpirun --allow-run-as-root --oversubscribe -np "$n" "$out/mpi_collectives" "$lo" "$hi" "$iters" >>"$out/openmpi-$n.txt"
  done
done
/usr/bin/python3 bench/comm_table.py "$out" "${rank_counts[@]}"
