#!/usr/bin/env bash
# bf16 and fp32 training of the bench GPT (bench/gpt_bench.json), dtrain against its PyTorch 2.11 peers,
# at 1 rank x 2 threads and 2 ranks x 1 thread. PyTorch runs tuned (what dtrain gives itself: glibc
# malloc keeping freed memory and OMP_WAIT_POLICY=PASSIVE, bench/peer_settings.sh), in bf16 autocast and
# in fp32, eager and under torch.compile (inductor, which fuses the elementwise work dtrain fuses by
# hand), with F.scaled_dot_product_attention and, in bf16, also with the attention written out (the
# faster of the two is the peer). dtrain times STEPS steps after 3 warm-up steps; PyTorch PT_STEPS after
# 2 (torch.compile compiles in the first). Rounds interleave every run; each row reports its best round.
# Usage: bench/bf16_peers.sh [STEPS] [PT_STEPS] [ROUNDS]    Prints a table (outputs kept in bench/out/bf16_peers).
set -euo pipefail
cd "$(dirname "$0")/.."
steps=${1:-10}
pt_steps=${2:-5}
rounds=${3:-1}
warmup=3
source bench/prepare.sh bf16_peers --peers
source bench/peer_settings.sh

for ((round = 1; round <= rounds; round++)); do
  for layout in "1 2" "2 1"; do
    read -r ranks threads <<<"$layout"
    tag="${ranks}x${threads}"
    for precision in bf16 fp32; do
      echo "round $round: dtrain $precision, $ranks rank(s) x $threads thread(s)..." >&2
      build/dtrain run --nproc-per-node "$ranks" --no-sample --config bench/gpt_bench.json \
        --set bf16.enabled="$([ "$precision" = bf16 ] && echo true || echo false)" --set train.threads="$threads" \
        --set train.steps=$((steps + warmup)) --set train.run_dir="$out/dtrain_${precision}_${tag}_$round" \
        >"$out/dtrain_${precision}_${tag}_$round.log" 2>&1
      for mode in eager compile; do
        for attention in sdpa manual; do
          if [ "$precision" = fp32 ] && [ "$attention" = manual ]; then continue; fi
          name="pytorch_${precision}_${mode}_${attention}_$tag"
          echo "round $round: PyTorch $precision, $mode, attention $attention, $ranks rank(s) x $threads thread(s)..." >&2
          # shellcheck disable=SC2086,SC2154 # the settings (bench/peer_settings.sh) split into VAR=VALUE words
          run_peer "$ranks" "$threads" bench/pytorch_gpt.py "$out/$name.json" "$out/${name}_$round" $kept_malloc $passive_wait \
            BENCH_PRECISION="$precision" BENCH_ATTENTION="$attention" BENCH_COMPILE="$([ "$mode" = compile ] && echo 1 || echo 0)" \
            BENCH_STEPS="$pt_steps" BENCH_WARMUP=2
        done
      done
    done
  done
done
/usr/bin/python3 bench/bf16_peers_table.py "$out" "$warmup"
