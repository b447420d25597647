# Sourced by the training benchmarks: what the PyTorch peer runs with when "tuned", which is what
# dtrain gives itself (glibc malloc keeping freed memory, src/train/host_memory.h, as the equivalent
# MALLOC_* variables; OpenMP waiters that sleep), a free port for its rendezvous, and how a peer is started.
kept_malloc="MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=268435456"
passive_wait="OMP_WAIT_POLICY=PASSIVE"
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
# run_peer RANKS THREADS SCRIPT JSON ERR [VAR=VALUE...]: one run of a PyTorch peer, its ranks started as
# torchrun would (RANK, WORLD_SIZE, a fresh rendezvous port) with the settings given in their
# environment; rank 0's JSON line is appended to JSON, rank r's stderr to ERR_rank<r>.err. A rank whose
# partner failed would wait in Gloo for its 30-minute timeout: `timeout` ends it first, and a failed
# rank is reported, not fatal, since some peers abort while tearing Gloo down after their result.
run_peer() {
  local ranks=$1 threads=$2 script=$3 json=$4 err=$5 port r pids=()
  shift 5
  port=$(free_port)
  for ((r = 0; r < ranks; r++)); do
    env "$@" RANK=$r WORLD_SIZE="$ranks" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" BENCH_THREADS="$threads" \
      timeout 1200 .venv/bin/python "$script" >>"$json" 2>>"${err}_rank$r.err" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || echo "note: a PyTorch rank exited with status $? (see ${err}_rank*.err)" >&2; done
}
