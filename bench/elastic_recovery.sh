#!/usr/bin/env bash
# Recovery of an elastic job (--nnodes 1:2) from a lost node, on loopback: two agents of 2 ranks
# train the tiny model with a checkpoint every 10 steps; once both run world 4, the agent that does not
# host the store is SIGKILLed. Measured from the kill: the first step at world 2 (a new metrics.jsonl
# line for the step after the resumed checkpoint), and the time lost per failure: that, plus the steps
# done again (from the checkpoint to the last step before the kill) at the new size's step time.
# Prints one row per trial and the median; raw logs stay in bench/out/elastic_recovery/.
# DTRAIN names the binary (default build/dtrain, built first).
# Usage: [DTRAIN=path/to/dtrain] bench/elastic_recovery.sh [TRIALS] [LAST_CALL_S] [HEARTBEAT_S]
set -euo pipefail
dtrain=$(realpath -m "${DTRAIN:-$(dirname "$0")/../build/dtrain}")
cd "$(dirname "$0")/.."
trials=${1:-3}
last_call=${2:-2}
heartbeat=${3:-5}
if [ -n "${DTRAIN:-}" ]; then
  [ -x "$dtrain" ] || { echo "DTRAIN=$DTRAIN ($dtrain) is not an executable" >&2; exit 1; }
  out=bench/out/elastic_recovery; rm -rf "$out"; mkdir -p "$out"
else
  source bench/prepare.sh elastic_recovery
fi
export OMP_NUM_THREADS=1
for ((trial = 1; trial <= trials; trial++)); do
  dir=$(realpath -m "$out/run_$trial")
  mkdir -p "$dir"
  port=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  job=(run --nnodes 1:2 --nproc-per-node 2 --master-port "$port" --rdzv-last-call "$last_call" --heartbeat-timeout "$heartbeat"
    --grace-period 2 --no-sample --set train.run_dir="$dir" --set model.preset=tiny --set train.steps=100000
    --set train.eval_every=0 --set train_micro_batch_size_per_gpu=2 --set checkpoint.every_steps=10 --set steps_per_print=1)
  echo "trial $trial: two agents, world 4..." >&2
  "$dtrain" "${job[@]}" >"$out/agent_a_$trial.log" 2>&1 & a=$!
  "$dtrain" "${job[@]}" >"$out/agent_b_$trial.log" 2>&1 & b=$!
  /usr/bin/python3 - "$dir" "$out/trial_$trial.json" "$out/agent_a_$trial.log" "$out/agent_b_$trial.log" <<'PY'
import glob, json, os, re, signal, sys, time
d, result, outputs = sys.argv[1], sys.argv[2], sys.argv[3:]
metrics = d + "/metrics.jsonl"

def logs():
    return {p: open(p).read() for p in glob.glob(d + "/launch-agent-*.log")}

def steps():
    try:
        return [json.loads(l) for l in open(metrics) if '"loss"' in l]
    except (OSError, ValueError):
        return []

def wait(what, cond, timeout=300):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v: return v
        time.sleep(0.02)
    sys.exit("timed out waiting for " + what)

wait("world 4 on both agents", lambda: sum("world 4" in t for t in logs().values()) == 2)
# Two checkpoints at world 4, then the kill lands between checkpoints.
def ckpts(): return sorted(glob.glob(d + "/ckpt/step-*[0-9]"))
start = len(ckpts())
wait("two checkpoints at world 4", lambda: len(ckpts()) >= start + 2)
wait("a step after the checkpoint", lambda: steps() and steps()[-1]["step"] % 10 >= 5)
victim = next(int(re.search(r"elastic agent \(pid (\d+)\)", t).group(1)) for t in logs().values() if "hosted by this agent" not in t)
before = steps()
last_step, inode = before[-1]["step"], os.stat(metrics).st_ino
os.kill(victim, signal.SIGKILL)
killed = time.time()
# The survivor's rank 0 says which checkpoint it resumed; the resume rewrites metrics.jsonl (a new
# inode) without the steps after it, so a line for the step after it there is the first at world 2.
offsets = {p: os.path.getsize(p) for p in outputs}
def resumed_step():
    for p, off in offsets.items():
        m = re.search(r"resumed from \S+ at step (\d+)", open(p).read()[off:])
        if m: return int(m.group(1))
resumed = wait("the resume at world 2", resumed_step)
wait("the first step at world 2", lambda: os.stat(metrics).st_ino != inode and any(x["step"] == resumed + 1 for x in steps()))
first_at = time.time()
wait("10 steps at world 2", lambda: steps() and steps()[-1]["step"] >= resumed + 11)
step_s = sorted(x["step_s"] for x in steps() if x["step"] > resumed + 1)
step_s = step_s[len(step_s) // 2]
recover = first_at - killed
json.dump({"recover_s": recover, "last_step": last_step, "resumed": resumed, "redone": last_step - resumed,
           "step_s_world2": step_s, "lost_s": recover + (last_step - resumed) * step_s}, open(result, "w"))
PY
  kill -TERM $a $b 2>/dev/null || true
  wait $a $b 2>/dev/null || true
  rm -rf "$dir/ckpt"
done
/usr/bin/python3 - "$out" "$trials" "$last_call" "$heartbeat" <<'PY'
import json, statistics, sys
out, trials, last_call, heartbeat = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
rows = [json.load(open(f"{out}/trial_{t}.json")) for t in range(1, trials + 1)]
print(f"elastic recovery, tiny model, 2 agents x 2 ranks on loopback, --rdzv-last-call {last_call}, --heartbeat-timeout {heartbeat}")
print("| trial | kill -> first step at world 2 (s) | steps redone | step at world 2 (s) | time lost (s) |")
print("|---|---|---|---|---|")
for i, r in enumerate(rows, 1):
    print(f"| {i} | {r['recover_s']:.2f} | {r['redone']} | {r['step_s_world2']:.3f} | {r['lost_s']:.2f} |")
print(f"| median | {statistics.median(r['recover_s'] for r in rows):.2f} | | | {statistics.median(r['lost_s'] for r in rows):.2f} |")
PY
