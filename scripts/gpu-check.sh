#!/usr/bin/env bash
# The CUDA path on a GPU machine: builds dtrain with -DDTRAIN_CUDA=ON against that machine's own
# PyTorch (torch 2.11 + CUDA 13, whose wheel holds LibTorch), runs the data-parallel equivalence tests
# and the demo on its GPU, and prints tokens/s and MFU for the benchmark model (bench/gpt_bench.json) in
# fp32 and in bf16 (whose linears take cuBLASLt's fused epilogues where the model has them).
#
# Such a machine may have no Debian packages and no network. What the build needs beyond PyTorch,
# CMake and nvcc travels with the working tree as Debian packages, fetched on a project machine:
#   scripts/gpu-check.sh --fetch     # here: apt-get download into gpu-deps/ (ignored by git)
#   scripts/gpu-check.sh             # there: dpkg -x them into gpu-deps/root, build, test, measure
# Output: a report of each step on stdout; the build is in build-gpu/.
set -euo pipefail
cd "$(dirname "$0")/.."
deps=gpu-deps
packages=(nlohmann-json3-dev libcli11-dev libgtest-dev libgloo-dev libxxhash-dev fortunes-min fortunes)

if [[ "${1:-}" == "--fetch" ]]; then
  mkdir -p "$deps"
  (cd "$deps" && apt-get download "${packages[@]}")
  echo "gpu-check: fetched ${#packages[@]} packages into $deps/"
  exit 0
fi
[[ $# -eq 0 ]] || { echo "usage: scripts/gpu-check.sh [--fetch]" >&2; exit 2; }

section() { printf '\n== %s\n' "$*"; }

python=${PYTHON:-python3}
torch_dir=$("$python" -c 'import os, torch; print(os.path.dirname(torch.__file__))')
section "platform"
"$python" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "GPUs", torch.cuda.device_count(),
              torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none")'
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true

prefix=()
if compgen -G "$deps/*.deb" >/dev/null; then
  mkdir -p "$deps/root"
  for deb in "$deps"/*.deb; do dpkg -x "$deb" "$deps/root"; done
  prefix=(-DCMAKE_PREFIX_PATH="$PWD/$deps/root/usr" -DGLOO_INCLUDE_DIR="$PWD/$deps/root/usr/include")
  export DTRAIN_FORTUNES_DIR="$PWD/$deps/root/usr/share/games/fortunes"
fi

section "build (CUDA)"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH
start=$(date +%s)
cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DDTRAIN_CUDA=ON -DDTRAIN_TORCH_DIR="$torch_dir" "${prefix[@]}" >/dev/null
cmake --build build-gpu -j "$(nproc)" >/dev/null
echo "built in $(( $(date +%s) - start )) s"

section "feature matrix (equivalence with one rank), resume and overlap tests on the GPU"
(cd build-gpu && ctest --output-on-failure -R 'FeatureMatrix|DataParallel|Resume')

section "demo"
build-gpu/dtrain run --set train.run_dir=runs/gpu-demo

for precision in fp32 bf16; do
  section "benchmark model, $precision: the matmul peak probed at start-up, tokens/s and MFU (last logged step)"
  build-gpu/dtrain run --nproc-per-node 1 --no-sample --config bench/gpt_bench.json --set train.steps=50 \
    --set bf16.enabled="$([ "$precision" = bf16 ] && echo true || echo false)" --set train.run_dir="runs/gpu-bench-$precision"
  grep -o 'matmul peak [0-9.]* GFLOP/s[^)]*' "runs/gpu-bench-$precision/rank-0.log" | head -n 1
  tail -n 1 "runs/gpu-bench-$precision/metrics.jsonl"
done

section "ZeRO-3 with the optimizer state and the parameter shard offloaded to host memory, against none"
for offload in none cpu; do
  build-gpu/dtrain run --nproc-per-node 1 --no-sample --set train.run_dir=runs/gpu-offload-$offload --set train.steps=20 \
    --set zero_optimization.stage=3 --set "zero_optimization.offload_optimizer={\"device\": \"$offload\"}" \
    --set "zero_optimization.offload_param={\"device\": \"$offload\"}"
done
echo "step, loss without offload, loss with (the same within fp32 rounding: the update runs on the CPU instead)"
paste -d' ' <(grep -o '"step":[0-9]*' runs/gpu-offload-none/metrics.jsonl) <(grep -o '"loss":[^,]*' runs/gpu-offload-none/metrics.jsonl) \
  <(grep -o '"loss":[^,]*' runs/gpu-offload-cpu/metrics.jsonl)
