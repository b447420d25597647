#!/usr/bin/env bash
# Collective bandwidth on this machine: dtrain bench-comm beside the same sweep done by OpenMPI,
# with the memory-copy bandwidth as the ceiling. Usage: bench/comm.sh [RANKS] [MAX_BYTES]
set -euo pipefail
cd "$(dirname "$0")/.."
ranks=${1:-2}
max_bytes=${2:-67108864}
scripts/setup.sh --bench
make -s build >/dev/null
out=build/bench
mkdir -p "$out"
gcc -O2 bench/memcpy_bandwidth.c -o "$out/memcpy_bandwidth"
mpicc -O2 bench/mpi_collectives.c -o "$out/mpi_collectives"

echo "## ceiling"
"$out/memcpy_bandwidth"
echo
echo "## dtrain bench-comm (Gloo over loopback TCP), $ranks ranks"
build/dtrain launch --nproc-per-node "$ranks" -- build/dtrain bench-comm -b 1024 -e "$max_bytes" | sed 's/^\[rank 0\] //'
echo
echo "## OpenMPI $(mpirun --version | head -1 | awk '{print $NF}') (shared memory), $ranks ranks"
mpirun --allow-run-as-root --oversubscribe -np "$ranks" "$out/mpi_collectives" 1024 "$max_bytes" 20
