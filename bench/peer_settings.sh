# Sourced by the training benchmarks: what the PyTorch peer runs with when "tuned", which is what
# dtrain gives itself (glibc malloc keeping freed memory, src/train/host_memory.h, as the equivalent
# MALLOC_* variables; OpenMP waiters that sleep), and a free port for its rendezvous.
kept_malloc="MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=17179869184 MALLOC_TOP_PAD_=268435456"
passive_wait="OMP_WAIT_POLICY=PASSIVE"
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
