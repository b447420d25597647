#!/usr/bin/env bash
# Pipeline parallelism's speed, memory and bubble on the benchmark GPT with 8 layers
# (bench/gpt_bench.json with model.n_layer=8: fp32, AdamW, clipping; 8 blocks so that pp 4 with 2
# virtual stages still has a block per chunk), a step of 8 micro-batches of 2 sequences (m = 2p at
# pp 4, where zero-bubble's schedule is in its steady state), one thread per rank. For pp 2 and pp 4
# and each schedule (gpipe, 1f1b, interleaved_1f1b with 2 virtual stages, zero_bubble): dtrain
# (`parallel.pp`, `parallel.pipeline.*`, the blocks split evenly and given explicitly, on its default
# backend, shared memory, with train.trace on) against PyTorch 2.11's torch.distributed.pipelining
# on the same model, chunks, split and micro-batches over Gloo (bench/pytorch_pipeline.py), as
# shipped and tuned (dtrain's malloc settings and passive OpenMP waiters: bench/peer_settings.sh).
# pp 4 puts 4 one-thread ranks on however many cores the machine has (2 here): oversubscribed, and
# its table says so. With a third argument "compile", the peer also runs each chunk through
# torch.compile (its first compile takes minutes; the zero-bubble schedule refuses it).
# Each run times STEPS steps after 2 warm-up steps, one after another; ROUNDS rounds alternate
# dtrain and the peer, and the table reports each row's median and spread over the rounds, and the
# median over rounds of dtrain's rate over the peer's of the same round. The bubble comes from each
# dtrain run's trace (bench/pipeline_bubble.py, beside `dtrain pipeline show` for the trace's costs
# and the closed form). Prints the tables; raw logs stay in bench/out/pipeline_parallel/.
# Usage: bench/pipeline_parallel.sh [STEPS] [ROUNDS] [compile]
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-4}
rounds=${2:-1}
modes=(eager)
[ "${3:-}" = compile ] && modes+=(compile)
warmup=2
layers=8 micro=2 micro_batches=8
source bench/prepare.sh pipeline_parallel --peers
source bench/peer_settings.sh
declare -A settings=([shipped]="" [tuned]="$kept_malloc $passive_wait")
schedules=(gpipe 1f1b interleaved_1f1b zero_bubble)
for ((round = 1; round <= rounds; round++)); do
  for pp in 2 4; do
    for schedule in "${schedules[@]}"; do
      v=$([ "$schedule" = interleaved_1f1b ] && echo 2 || echo 1)
      chunks=$((pp * v))
      split=$(/usr/bin/python3 -c "print(','.join(['$((layers / chunks))'] * $chunks))")
      name=pp${pp}_${schedule}
      echo "round $round: pp $pp, $schedule: dtrain..." >&2
      build/dtrain run --nproc-per-node "$pp" --no-sample --config bench/gpt_bench.json --set train.threads=1 \
        --set model.n_layer=$layers --set train_micro_batch_size_per_gpu=$micro --set gradient_accumulation_steps=$micro_batches \
        --set parallel.pp="$pp" --set parallel.pipeline.schedule="$schedule" --set parallel.pipeline.virtual_stages="$v" \
        --set "parallel.pipeline.split=[$split]" --set train.trace=true --set train.steps=$((steps + warmup)) \
        --set train.run_dir="$out/dtrain_${name}_$round" >"$out/dtrain_${name}_$round.log" 2>&1 ||
        echo "note: dtrain failed (see $out/dtrain_${name}_$round.log)" >&2
      for mode in "${modes[@]}"; do
        [ "$mode" = compile ] && [ "$schedule" = zero_bubble ] && continue
        for setting in shipped tuned; do
          peer=pytorch_${name}_${mode}_$setting
          echo "round $round: pp $pp, $schedule: PyTorch $mode ($setting)..." >&2
          # shellcheck disable=SC2086 # the settings split into VAR=VALUE words
          run_peer "$pp" 1 bench/pytorch_pipeline.py "$out/${peer}_$round.json" "$out/${peer}_$round" ${settings[$setting]} \
            BENCH_LAYERS="$layers" BENCH_MICRO="$micro" BENCH_MICRO_BATCHES="$micro_batches" BENCH_SCHEDULE="$schedule" \
            BENCH_VIRTUAL_STAGES="$v" BENCH_SPLIT="$split" BENCH_STEPS="$steps" BENCH_WARMUP="$warmup" \
            BENCH_COMPILE="$([ "$mode" = compile ] && echo 1 || echo 0)"
        done
      done
    done
  done
done
/usr/bin/python3 bench/pipeline_parallel_table.py "$out" "$warmup" "$(nproc)"
