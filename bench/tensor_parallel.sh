#!/usr/bin/env bash
# Tensor parallelism's speed on the benchmark GPT (bench/gpt_bench.json: fp32, AdamW, clipping), two
# ranks with one thread each: dtrain with data parallelism (dp 2), tensor parallelism (tp 2) and tensor
# plus sequence parallelism (tp 2 + SP), against PyTorch 2.11 in the same three layouts
# (bench/pytorch_tensor_parallel.py: DDP, and DTensor's parallelize_module with ColwiseParallel,
# RowwiseParallel, SequenceParallel and loss_parallel, over Gloo), eager and under torch.compile. The
# peer runs as shipped and tuned (glibc malloc keeping freed memory as dtrain does, and
# OMP_WAIT_POLICY=PASSIVE: bench/peer_settings.sh); "tuned" in the summary is the fastest of its runs.
# dtrain's tp rows run once more with parallel.tp_overlap_grad_reduce=false, which waits for the
# input gradient's all-reduce (reduce-scatter under SP) before the weight-gradient GEMMs instead of
# behind them: the difference is what the overlap hides.
# Under dp a step is 2 x 8 sequences, under tp 8 (both ranks train one micro-batch). Each run times
# STEPS steps after 3 warm-up steps, one after another so they never share the cores; ROUNDS rounds
# interleave and each row reports its best. The communication share is what each side measures:
# dtrain from its metrics (comm_ms: under dp the gradient all-reduce, partly behind backward; under
# tp the tensor-parallel collectives), the peer from a profile of 2 more steps (see
# bench/pytorch_tensor_parallel.py). A peer run that fails (torch.compile with DTensor on the CPU may)
# is a row saying so with the error's first line. Prints a table; raw logs stay in
# bench/out/tensor_parallel/.
# Usage: bench/tensor_parallel.sh [STEPS] [ROUNDS]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
rounds=${2:-1}
warmup=3
source bench/prepare.sh tensor_parallel --peers
source bench/peer_settings.sh
declare -A settings=([shipped]="" [tuned]="$kept_malloc $passive_wait")
declare -A dtrain_layout=([dp]="" [tp]="--set parallel.tp=2" [tp_sp]="--set parallel.tp=2 --set parallel.sequence_parallel=true"
  [tp_no_overlap]="--set parallel.tp=2 --set parallel.tp_overlap_grad_reduce=false"
  [tp_sp_no_overlap]="--set parallel.tp=2 --set parallel.sequence_parallel=true --set parallel.tp_overlap_grad_reduce=false")
for ((round = 1; round <= rounds; round++)); do
  for layout in dp tp tp_sp tp_no_overlap tp_sp_no_overlap; do
    echo "round $round: dtrain, $layout..." >&2
    # shellcheck disable=SC2086 # the layout's --set pairs split into words
    build/dtrain run --nproc-per-node 2 --no-sample --config bench/gpt_bench.json --set train.threads=1 \
      --set train.steps=$((steps + warmup)) ${dtrain_layout[$layout]} \
      --set train.run_dir="$out/dtrain_${layout}_$round" >"$out/dtrain_${layout}_$round.log" 2>&1
  done
  for layout in dp tp tp_sp; do
    for mode in eager compile; do
      for setting in shipped tuned; do
        name=pytorch_${layout}_${mode}_$setting
        echo "round $round: PyTorch $layout, $mode ($setting)..." >&2
        # shellcheck disable=SC2086 # the settings split into VAR=VALUE words
        run_peer 2 1 bench/pytorch_tensor_parallel.py "$out/$name.json" "$out/${name}_$round" ${settings[$setting]} \
          BENCH_STEPS="$steps" BENCH_WARMUP="$warmup" BENCH_LAYOUT="$layout" BENCH_COMPILE="$([ "$mode" = compile ] && echo 1 || echo 0)"
      done
    done
  done
done
/usr/bin/python3 bench/tensor_parallel_table.py "$out" "$warmup"
