#!/usr/bin/env bash
# Fault-tolerance soak: one job on the tiny model, killed by train.inject_failure at N seeded random
# places (rank, step and phase), each in its own restart round, so that the launcher restarts it N
# times from its newest checkpoint; then the same job uninterrupted. It prints a row per injection
# (where it landed: the rank the launcher saw die and how, the last step logged before, the step
# the next round resumed at, the steps redone) and passes when every injection landed where it was
# aimed and the final checkpoints hold the same parameters and optimizer state, bit for bit (a
# resume repeats the steps it redoes exactly: train.deterministic, one world size).
# Usage: scripts/soak_failures.sh [--injections N] [--seed S] [--nproc P] [--spacing K]
#          [--every-steps E] [--phases a,b,...] [--dir DIR] [--dtrain PATH] [--set key=value ...]
# --spacing: at most K steps from one injection to the next (the run is about N*(K+1)/2 + 2 steps);
# --every-steps: checkpoint.every_steps (save, manifest and commit injections land on save steps);
# --set: more config for both runs (e.g. --set zero_optimization.stage=2).
# Exit status: 0 when every row says ok and the parameters are equal, 1 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."
injections=20 seed=1 nproc=2 spacing=2 every=1 phases=forward,backward,collective,optimizer,write,save
dtrain=build/dtrain dir=
extra=()
while [ $# -gt 0 ]; do
  case $1 in
    --injections) injections=$2 ;;
    --seed) seed=$2 ;;
    --nproc) nproc=$2 ;;
    --spacing) spacing=$2 ;;
    --every-steps) every=$2 ;;
    --phases) phases=$2 ;;
    --dir) dir=$2 ;;
    --dtrain) dtrain=$2 ;;
    --set) extra+=(--set "$2") ;;
    *) echo "soak_failures.sh: unknown argument '$1' (see the usage at the top of the script)" >&2; exit 2 ;;
  esac
  shift 2
done
for flag in injections:$injections nproc:$nproc spacing:$spacing every-steps:$every; do
  [[ ${flag#*:} =~ ^[1-9][0-9]{0,5}$ ]] || { echo "soak_failures.sh: --${flag%%:*} must be a whole number >= 1, got '${flag#*:}'" >&2; exit 2; }
done
[[ $seed =~ ^[0-9]{1,9}$ ]] || { echo "soak_failures.sh: --seed must be a whole number >= 0, got '$seed'" >&2; exit 2; }
[ -x "$dtrain" ] || { echo "soak_failures.sh: --dtrain $dtrain is not an executable (build it: cmake --build build --target dtrain_cli)" >&2; exit 2; }
dir=${dir:-$(mktemp -d "${TMPDIR:-/tmp}/dtrain-soak.XXXXXX")}
rm -rf "$dir/injected" "$dir/uninterrupted"
mkdir -p "$dir"
IFS=, read -r -a phase_list <<<"$phases"

# A linear congruential generator in shell arithmetic: the same injections for a seed on any machine.
state=$seed
draw() {  # draw N: a number in [0, N) into $drawn
  state=$(((state * 1103515245 + 12345) % 2147483648))
  drawn=$(((state >> 16) % $1))
}

# Injection i (round i) at a step past injection i-1's: round i resumes at or before that step, so
# it reaches its own.
ranks=() steps=() points=() entries=
step=0
for ((i = 0; i < injections; i++)); do
  draw "$spacing"; step=$((step + 1 + drawn))
  draw "${#phase_list[@]}"; point=${phase_list[$drawn]}
  draw "$nproc"; rank=$drawn
  case $point in
    write | save | manifest | commit) step=$(((step + every - 1) / every * every)) ;;
  esac
  case $point in manifest | commit) rank=0 ;; esac  # rank 0 commits
  ranks+=("$rank") steps+=("$step") points+=("$point")
  entries+="${entries:+,}{\"rank\":$rank,\"step\":$step,\"phase\":\"$point\",\"round\":$i}"
done
total=$((step + 2))

job=(run --nproc-per-node "$nproc" --no-sample --set model.preset=tiny --set train.steps="$total" --set train.seed=7
  --set train.eval_every=0 --set train.peak_flops=1e9 --set train.deterministic=true --set steps_per_print=1
  --set checkpoint.every_steps="$every" --set 'scheduler={"type":"cosine","params":{"warmup_steps":1}}' "${extra[@]}")
echo "soak: $injections injections (seed $seed) on $nproc ranks over $total steps, a checkpoint every $every step(s); logs in $dir" >&2
export OMP_NUM_THREADS=1
"$dtrain" "${job[@]}" --max-restarts "$injections" --set train.run_dir="$dir/injected" \
  --set "train.inject_failure=[$entries]" >"$dir/injected.log" 2>&1 || true
"$dtrain" "${job[@]}" --set train.run_dir="$dir/uninterrupted" >"$dir/uninterrupted.log" 2>&1 ||
  { tail -20 "$dir/uninterrupted.log" >&2; echo "soak: the uninterrupted run failed ($dir/uninterrupted.log)" >&2; exit 1; }

# Per round of the injected run's log: who failed and how, the last step rank 0 logged, and the step
# the round resumed at (0: from scratch).
awk -v rounds="$((injections + 1))" '
  BEGIN { r = 0; for (i = 0; i < rounds; i++) { failed[i] = "-"; last[i] = 0; resumed[i] = 0 } }
  /^dtrain launch: restarting the job/ { r++ }
  /^dtrain launch: rank [0-9]+ failed: / { sub(/^dtrain launch: /, ""); sub(/ failed: signal [0-9]+ \(/, " "); sub(/\)$/, ""); failed[r] = $0 }
  /^\[rank 0\] step [0-9]+\// { split($4, s, "/"); last[r] = s[1] }
  /^\[rank 0\] resumed from .* at step [0-9]+/ { match($0, /at step [0-9]+/); resumed[r] = substr($0, RSTART + 8, RLENGTH - 8) }
  END { for (i = 0; i < rounds; i++) print i "\t" failed[i] "\t" last[i] "\t" resumed[i] }
' "$dir/injected.log" >"$dir/rounds.tsv"

status=0
printf '%-3s %-5s %-27s %-16s %-9s %-10s %-6s %s\n' '#' round 'injected at' 'launcher saw' 'last step' 'resumed at' redone verdict
for ((i = 0; i < injections; i++)); do
  IFS=$'\t' read -r _ failed last _ < <(sed -n "$((i + 1))p" "$dir/rounds.tsv")
  IFS=$'\t' read -r _ _ _ resumed < <(sed -n "$((i + 2))p" "$dir/rounds.tsv")
  s=${steps[$i]} p=${points[$i]}
  # A kill before step s's checkpoint is committed resumes from the one before; after it, from it.
  # "save" on a rank other than 0 lands after the ranks agreed to commit, and rank 0 may finish.
  before=$(((s - 1) / every * every)) expected=$before
  [ "$p" = commit ] && expected=$s
  [ "$p" = save ] && [ "${ranks[$i]}" != 0 ] && [ "$resumed" = "$s" ] && expected=$s
  verdict=ok
  if [ "$failed" = - ]; then verdict="MISSED: no rank failed"; elif [ "$failed" != "rank ${ranks[$i]} SIGKILL" ]; then
    verdict="WRONG: expected rank ${ranks[$i]} SIGKILL"; elif [ "$resumed" != "$expected" ]; then
    verdict="WRONG: expected a resume at step $expected"; fi
  [ "$verdict" = ok ] || status=1
  redone=$((last > resumed ? last - resumed : 0))
  printf '%-3s %-5s %-27s %-16s %-9s %-10s %-6s %s\n' "$((i + 1))" "$i" "rank ${ranks[$i]} step $s $p" "$failed" "$last" "$resumed" \
    "$redone" "$verdict"
done
if ! grep -q "^dtrain launch: the job succeeded after $injections restarts" "$dir/injected.log"; then
  tail -20 "$dir/injected.log" >&2
  echo "soak: the injected run did not succeed after $injections restarts ($dir/injected.log)" >&2
  exit 1
fi

final=$(printf 'step-%08d' "$total")
shards=$(cd "$dir/uninterrupted/ckpt/$final" && ls shard-*.safetensors)
for f in $shards; do
  if ! cmp -s "$dir/injected/ckpt/$final/$f" "$dir/uninterrupted/ckpt/$final/$f"; then
    echo "final parameters: $final/$f differs from the uninterrupted run's: FAIL" >&2
    status=1
  fi
done
[ "$status" -ne 0 ] || echo "final parameters: $final equal to the uninterrupted run's, bit for bit ($(echo $shards))"
exit "$status"
