#!/usr/bin/env bash
# Goodput of a job of NODES nodes against the MTBF of one node, with checkpoints in the step (stall
# C_SYNC s a save) and in the background (stall C_ASYNC s, durable WRITE s after it starts), each at
# the Young/Daly interval tau = sqrt(2 C M), M the job's MTBF (the node's over NODES). Per failure the
# job loses RESTART_S s (detection, restart, load) and the work since the last durable checkpoint:
# tau/2 on average, plus WRITE for a background save, which is not durable until written. Goodput is
# 1 - C/tau - (RESTART_S + tau/2 [+ WRITE]) / M, to first order (Daly 2006), and a background save
# cannot come more often than one WRITE apart (one in flight). The stalls are bench/checkpoint_stall.sh's.
# Usage: bench/goodput_projection.sh C_SYNC C_ASYNC WRITE [NODES] [RESTART_S]
set -euo pipefail
[ $# -ge 3 ] || { sed -n 's/^# Usage: //p' "$0" >&2; exit 2; }
awk -v cs="$1" -v ca="$2" -v w="$3" -v n="${4:-1000}" -v r="${5:-300}" 'BEGIN {
  printf "%d nodes, restart %g s; sync: stall %g s a save; async: stall %g s, written in %g s\n", n, r, cs, ca, w
  print "| node MTBF (years) | job MTBF (h) | sync interval (min) | sync goodput | async interval (min) | async goodput |"
  print "|---:|---:|---:|---:|---:|---:|"
  split("1 2 5 10", years, " ")
  for (i = 1; i <= 4; ++i) {
    m = years[i] * 365 * 24 * 3600 / n
    ts = sqrt(2 * cs * m)
    ta = sqrt(2 * ca * m); if (ta < w) ta = w
    gs = 1 - cs / ts - (r + ts / 2) / m
    ga = 1 - ca / ta - (r + ta / 2 + w) / m
    printf "| %d | %.1f | %.1f | %.2f%% | %.1f | %.2f%% |\n", years[i], m / 3600, ts / 60, 100 * gs, ta / 60, 100 * ga
  }
}'
