#!/usr/bin/env bash
# The CUDA path on a GPU machine: builds dtrain with -DDTRAIN_CUDA=ON against that machine's own
# PyTorch (torch 2.11 + CUDA 13, whose wheel holds LibTorch), runs the equivalence tests of every
# parallelism (the feature matrix), the resume and data-parallel tests, the fused kernels' GPU tests
# and the demo on its GPU, then prints tokens/s and MFU for the benchmark model (bench/gpt_bench.json)
# in fp32 and bf16 and for a GPU-sized shape of it in bf16 (also with 4 micro-batches per step, and
# profiled by kernel), each run's estimated against measured peak memory and the device memory the
# driver counts for it, cuBLAS's workspaces (bench/cublas_workspace.py), checkpointed activations
# kept in host memory (cpu_checkpointing), each rank's estimate against its peak for sharded layouts
# (2 ranks sharing the GPU), ZeRO-3 with its state offloaded to the host, and last
# the PyTorch peer (bench/pytorch_gpt.py) on the same shapes, so that a short lease measures dtrain first.
#
# Such a machine may have no Debian packages and no network. What the build needs beyond PyTorch,
# CMake and nvcc travels with the working tree as Debian packages, fetched on a project machine:
#   scripts/gpu-check.sh --fetch     # here: apt-get download into gpu-deps/ (ignored by git)
#   scripts/gpu-check.sh             # there: dpkg -x them into gpu-deps/root, build, test, measure
# DTRAIN_GPU_BUILD=DIR uses a CUDA build made elsewhere against the same PyTorch version (its dtrain,
# tests/test_train and tests/test_model) instead of building; its shared libraries must be on
# LD_LIBRARY_PATH.
# GPU_CHECK_PEERS=0 leaves the PyTorch peer's runs out.
# Output: a report of each step on stdout; the build is in build-gpu/, the runs in runs/gpu-*.
set -uo pipefail
cd "$(dirname "$0")/.."
deps=gpu-deps
packages=(nlohmann-json3-dev libcli11-dev libgtest-dev libgloo-dev libxxhash-dev liburing-dev liburing2
          libsentencepiece-dev libsentencepiece0 libicu-dev libicu72 libstb-dev libstb0 libfreetype-dev libfreetype6
          libpng16-16 libbrotli1 fortunes-min fortunes)

if [[ "${1:-}" == "--fetch" ]]; then
  mkdir -p "$deps"
  (cd "$deps" && apt-get download "${packages[@]}") || exit 1
  echo "gpu-check: fetched ${#packages[@]} packages into $deps/"
  exit 0
fi
[[ $# -eq 0 ]] || { echo "usage: scripts/gpu-check.sh [--fetch]" >&2; exit 2; }

section() { printf '\n== %s\n' "$*"; }
failed=()
# step NAME SECONDS LOG COMMAND...: runs one step under a time limit, so that one hang cannot take the
# rest of the check with it, its output into LOG (- for stdout); a failure is remembered and its
# log's end printed.
step() {
  local name=$1 limit=$2 log=$3
  shift 3
  local rc=0
  if [[ $log == - ]]; then
    timeout --kill-after=10 "$limit" "$@" || rc=$?
  else
    timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1 || rc=$?
  fi
  ((rc == 0)) && return 0
  echo "gpu-check: '$name' failed (exit $rc)"
  [[ $log == - ]] || tail -n 15 "$log"
  failed+=("$name")
  return 1
}

python=${PYTHON:-python3}
section "platform"
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count(),
              torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv,noheader || true
echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2), $(nproc) cores"

if compgen -G "$deps/*.deb" >/dev/null; then
  mkdir -p "$deps/root"
  for deb in "$deps"/*.deb; do dpkg -x "$deb" "$deps/root"; done
  export DTRAIN_FORTUNES_DIR="$PWD/$deps/root/usr/share/games/fortunes"
  export LD_LIBRARY_PATH="$PWD/$deps/root/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi

build=${DTRAIN_GPU_BUILD:-build-gpu}
if [[ -z "${DTRAIN_GPU_BUILD:-}" ]]; then
  section "build (CUDA)"
  torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
  prefix=()
  [[ -d $deps/root ]] && prefix=(-DCMAKE_PREFIX_PATH="$PWD/$deps/root/usr" -DGLOO_INCLUDE_DIR="$PWD/$deps/root/usr/include")
  command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
  start=$(date +%s)
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA=ON -DDTRAIN_TORCH_DIR="$torch_dir" "${prefix[@]}" >/dev/null &&
    cmake --build "$build" -j "$(nproc)" --target dtrain_cli test_train test_model >/dev/null || exit 1
  echo "built in $(($(date +%s) - start)) s"
fi
dtrain=$build/dtrain

section "equivalence of every parallelism with one rank (the feature matrix), resume and data-parallel tests, on the GPU"
# The ranks of a multi-rank row share the one GPU over Gloo where there are fewer GPUs than ranks.
# gtest's own sharding spreads the tests over the cores; each shard prints its own summary.
shards=$(($(nproc) < 12 ? $(nproc) : 12))
mkdir -p runs
for ((i = 0; i < shards; i++)); do
  GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout 180 "$build/tests/test_train" \
    --gtest_filter='*FeatureMatrix*:*Resume*:DataParallel*' >"runs/gpu-tests-$i.log" 2>&1 &
done
wait
grep -h -E '^\[  PASSED  \]' runs/gpu-tests-*.log
if grep -q -h -E '^\[  FAILED  \]|^terminate|Segmentation' runs/gpu-tests-*.log || [[ $(cat runs/gpu-tests-*.log | grep -c '^\[  PASSED  \]') -ne $shards ]]; then
  grep -h -E '^\[  FAILED  \]' runs/gpu-tests-*.log | sort -u
  grep -h -B2 -A12 -E 'Failure$|^terminate' runs/gpu-tests-*.log | head -n 80
  failed+=(tests)
fi

section "the fused kernels' GPU paths against their references"
step "fused kernels" 60 - "$build/tests/test_model" --gtest_filter='*BiasGelu*' --gtest_brief=1

section "demo"
step demo 90 runs/gpu-demo.out "$dtrain" run --set train.run_dir=runs/gpu-demo && tail -n 3 runs/gpu-demo.out

# run_bench NAME SETS...: trains the benchmark model with the given --set options and prints the
# matmul peak probed at start-up, the last three logged steps, the memory line and the most device
# memory the driver counted for the run's process (sampled every 100 ms: the CUDA context, the loaded
# kernels and every allocation, the caching allocator's reserved pool among them).
run_bench() {
  local name=$1
  shift
  local sets=()
  for s in "$@"; do sets+=(--set "$s"); done
  nvidia-smi --query-compute-apps=used_memory --format=csv,noheader,nounits -lms 100 >"runs/gpu-$name.smi" 2>/dev/null &
  local smi=$! rc=0
  step "$name" 120 "runs/gpu-$name.out" "$dtrain" run --nproc-per-node 1 --no-sample --config bench/gpt_bench.json "${sets[@]}" \
    --set train.run_dir="runs/gpu-$name" || rc=1
  kill "$smi" 2>/dev/null
  wait "$smi" 2>/dev/null
  ((rc == 0)) || return 0
  grep -o 'matmul peak [0-9.]* GFLOP/s[^)]*' "runs/gpu-$name/rank-0.log" | head -n 1
  grep -E 'step [0-9]+/' "runs/gpu-$name/rank-0.log" | tail -n 3 | cut -d' ' -f3-
  grep -h -o -E 'memory: (estimated|no estimate).*' "runs/gpu-$name/rank-0.log"
  echo "device memory of the process (nvidia-smi, most): $(sort -n "runs/gpu-$name.smi" | tail -n 1) MiB"
}
# peer NAME ENV...: the PyTorch peer on the GPU, one JSON line.
peer() {
  local name=$1
  shift
  [[ ${GPU_CHECK_PEERS:-1} == 0 ]] && return 0
  echo "PyTorch $name:"
  step "peer $name" 180 - env BENCH_DEVICE=cuda BENCH_PRECISION=bf16 BENCH_STEPS=20 "$@" "$python" bench/pytorch_gpt.py
}

for precision in fp32 bf16; do
  section "benchmark model, $precision: the matmul peak, tokens/s and MFU (last logged steps), memory"
  run_bench "bench-$precision" train.steps=40 "bf16.enabled=$([ "$precision" = bf16 ] && echo true || echo false)"
done

# The benchmark model's 10M parameters are too few to occupy a GPU; this shape (GPT-2 medium's depth
# and width at 1024 tokens, 302M parameters) is large enough for MFU to mean something.
gpu_shape=(model.n_layer=24 model.n_head=16 model.d_model=1024 model.seq_len=1024 train_micro_batch_size_per_gpu=16)
section "GPU-sized model (24 layers, d 1024, seq 1024, micro-batch 16), bf16"
run_bench gpu-shape-bf16 train.steps=30 bf16.enabled=true "${gpu_shape[@]}"

section "the same, 4 micro-batches per step: what runs once per step (optimizer, clipping) is the difference"
run_bench gpu-shape-bf16-accum4 train.steps=12 bf16.enabled=true "${gpu_shape[@]}" gradient_accumulation_steps=4

section "where the GPU-sized model's step goes: LibTorch's profiler over steps 10-12, summed by kernel"
run_bench gpu-shape-bf16-profile train.steps=12 "train.profile_steps=[10, 12]" bf16.enabled=true "${gpu_shape[@]}" >/dev/null
[[ -f runs/gpu-gpu-shape-bf16-profile/profile-rank-0.json ]] &&
  "$python" bench/kernel_summary.py runs/gpu-gpu-shape-bf16-profile/profile-rank-0.json --steps 3 --top 30

section "cuBLAS's workspaces in the caching allocator, which the memory estimate counts"
step "cuBLAS workspaces" 60 - "$python" bench/cublas_workspace.py

section "checkpointed block inputs on the device and in host memory (cpu_checkpointing), benchmark model, fp32"
full_ac=(train.steps=10 train.activation_checkpointing=full)
run_bench full-ac "${full_ac[@]}"
run_bench full-ac-host "${full_ac[@]}" activation_checkpointing.cpu_checkpointing=true
run_bench full-ac-host-contiguous "${full_ac[@]}" activation_checkpointing.cpu_checkpointing=true \
  activation_checkpointing.partition_activations=true activation_checkpointing.contiguous_memory_optimization=true
run_bench every2-host train.steps=10 train.activation_checkpointing=every:2 activation_checkpointing.cpu_checkpointing=true
run_bench full-ac-host-bf16 "${full_ac[@]}" activation_checkpointing.cpu_checkpointing=true bf16.enabled=true

section "each rank's estimate against its measured peak: sharded layouts of the benchmark model, 2 ranks sharing the GPU"
# Each rank is a process with its own caching allocator, so its peak is its own on one GPU as on two.
sharded_runs=()
# sharded LAYOUT SETS...: one 2-rank run of 6 steps; its rows come from bench/memory_ranks_table.py.
sharded() {
  local layout=$1 sets=()
  shift
  for s in "$@"; do sets+=(--set "$s"); done
  local dir="runs/gpu-sharded-${layout//[^a-zA-Z0-9]/-}"
  step "sharded: $layout" 120 "$dir.out" "$dtrain" run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json \
    --set train.steps=6 "${sets[@]}" --set train.run_dir="$dir"
  sharded_runs+=("$layout=$dir")
}
pp_1f1b=(parallel.pp=2 gradient_accumulation_steps=4)
sharded "DDP"
sharded "ZeRO-2" zero_optimization.stage=2
sharded "ZeRO-3" zero_optimization.stage=3
sharded "ZeRO-3, bf16" zero_optimization.stage=3 bf16.enabled=true
sharded "tp 2" parallel.tp=2
sharded "tp 2 with sp" parallel.tp=2 parallel.sequence_parallel=true
sharded "pp 2" "${pp_1f1b[@]}"
sharded "pp 2, full recomputation" "${pp_1f1b[@]}" train.activation_checkpointing=full
sharded "pp 2, full recomputation, cpu_checkpointing" "${pp_1f1b[@]}" train.activation_checkpointing=full \
  activation_checkpointing.cpu_checkpointing=true
sharded "pp 2, every:2, cpu_checkpointing" "${pp_1f1b[@]}" train.activation_checkpointing=every:2 \
  activation_checkpointing.cpu_checkpointing=true
sharded "cp 2" parallel.cp=2
sharded "cp 2, bf16" parallel.cp=2 bf16.enabled=true
"$python" bench/memory_ranks_table.py "${sharded_runs[@]}"

section "ZeRO-3 with the optimizer state and the parameter shard offloaded to host memory, against none"
for offload in none cpu; do
  step "offload $offload" 90 "runs/gpu-offload-$offload.out" "$dtrain" run --nproc-per-node 1 --no-sample \
    --set train.run_dir=runs/gpu-offload-$offload --set train.steps=20 --set zero_optimization.stage=3 \
    --set "zero_optimization.offload_optimizer={\"device\": \"$offload\"}" \
    --set "zero_optimization.offload_param={\"device\": \"$offload\"}" || continue
  grep -h -o 'memory: estimated.*' "runs/gpu-offload-$offload/rank-0.log"
done
echo "step, loss without offload, loss with (the same within fp32 rounding: the update runs on the CPU instead)"
losses() { grep '"loss"' "runs/gpu-offload-$1/metrics.jsonl" | grep -o "\"$2\":[^,}]*"; }
paste -d' ' <(losses none step) <(losses none loss) <(losses cpu loss)

section "the PyTorch peer on the same shapes"
peer "bench model, bf16, as shipped"
peer "GPU-sized model, bf16, as shipped" BENCH_SHAPE=24,16,1024,1024 BENCH_MICRO=16
peer "GPU-sized model, bf16, fused AdamW" BENCH_SHAPE=24,16,1024,1024 BENCH_MICRO=16 BENCH_FUSED_ADAMW=1
peer "GPU-sized model, bf16, fused AdamW, torch.compile" BENCH_SHAPE=24,16,1024,1024 BENCH_MICRO=16 BENCH_FUSED_ADAMW=1 BENCH_COMPILE=1

section "summary"
if ((${#failed[@]})); then
  echo "gpu-check: failed: ${failed[*]}"
  exit 1
fi
echo "gpu-check: every step passed"
