"""The pipeline bubble of a traced dtrain run (train.trace: true), measured, beside the simulator's
and the closed form. Standard library only.

From RUN_DIR/trace.json: each rank's compute slices ("F", "B", "I", "W", args mb and chunk) and its
point-to-point receives. The executor waits for the receive an action consumes before it opens the
action's slice, so its slices are pure compute; traces of earlier executors opened the slice first,
so the part of a receive's wait (its blocked_us, ending where the receive ends) that lies inside the
slice is taken off the slice's front, and nothing is taken where the two do not overlap. Steps are
told apart by the loss all-reduce each rank runs after its passes. Per step, the pipeline's window runs from the first compute start on any rank to
the last compute end on any rank (the simulator's makespan); a rank's idle time is the window less
its compute, and the bubble is the idle time of all ranks over pp x window (the simulator's
definition). The first --skip steps are left out (warm-up).

The simulator is `dtrain pipeline show` with this trace's mean compute costs (per chunk, F, B and,
under zero_bubble, W; I = B - W), the closed form the formula it prints; beside it what
`dtrain pipeline show --trace` gives, whose means take the slices as they are. The run's metrics.jsonl,
when it is beside the trace, gives each step's wall time, so the share of the step outside the
pipeline's window (the tied-embedding and loss all-reduces, the gradient norm, the optimizer) is
shown too, and so is how a rank spends the time between its compute slices: blocked on the receive
the next action consumes, or otherwise in the executor (posting receives, handing sends over). The
schedule, pp, virtual stages and micro-batches are read from the trace.
Usage: python3 bench/pipeline_bubble.py RUN_DIR/trace.json [--skip 1] [--dtrain build/dtrain] [--table-row]"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys


def load(path):
    events = json.load(open(path))["traceEvents"]
    return [e for e in events if e.get("ph") == "X"]


def split_steps(events):
    """Per rank, its compute slices and receives grouped by step: {rank: [[slice, ...], ...]} and the
    receives by (rank, label) in time order."""
    ends = {}
    for e in events:
        if e.get("cat") == "comm" and e["name"].startswith("all_reduce") and "loss from the last stage" in e["name"]:
            ends.setdefault(e["pid"], []).append(e["ts"])
    steps = {}
    for rank, marks in ends.items():
        marks.sort()
        slices = sorted((e for e in events if e["pid"] == rank and e.get("cat") == "compute"), key=lambda e: e["ts"])
        per_step, i = [], 0
        for mark in marks:
            step = []
            while i < len(slices) and slices[i]["ts"] < mark:
                step.append(slices[i])
                i += 1
            per_step.append(step)
        steps[rank] = per_step
    receives = {}
    for e in events:
        if e.get("cat") == "comm" and e["name"].startswith("recv<-"):
            receives.setdefault((e["pid"], e["args"]["label"]), []).append(e)
    for r in receives.values():
        r.sort(key=lambda e: e["ts"])
    return steps, receives


def receive_wait_within(s, rank, receives, lo, hi):
    """How much of [lo, hi] the rank spent blocked on the receive slice `s` consumes (its blocked_us,
    ending where the receive's slice ends)."""
    kind = {"F": "activation", "B": "gradient", "I": "gradient"}.get(s["name"])
    if not kind:
        return 0.0
    label = f"{kind} of micro-batch {s['args']['mb']}, chunk {s['args']['chunk']}"
    posted = [r for r in receives.get((rank, label), []) if r["ts"] <= s["ts"]]
    if not posted:
        return 0.0
    wait_end = posted[-1]["ts"] + posted[-1]["dur"]
    wait_start = wait_end - posted[-1]["args"].get("blocked_us", 0.0)
    return max(0.0, min(wait_end, hi) - max(wait_start, lo))


def pure_compute(s, rank, receives):
    """(start, duration) of a slice's compute: the part of the wait for the receive it consumes that
    lies inside the slice taken off its front."""
    waited = receive_wait_within(s, rank, receives, s["ts"], s["ts"] + s["dur"])
    return s["ts"] + waited, s["dur"] - waited


def between_actions(step, rank, receives):
    """(time blocked on a receive, other time, gaps) between a rank's consecutive compute slices in
    one step: what the executor spends outside compute that is not waiting for data."""
    waited = other = 0.0
    for a, b in zip(step, step[1:]):
        lo, hi = a["ts"] + a["dur"], b["ts"]
        w = receive_wait_within(b, rank, receives, lo, hi)
        waited += w
        other += max(0.0, hi - lo - w)
    return waited, other, max(0, len(step) - 1)


def shape(steps):
    """(schedule, pp, virtual stages, micro-batches) from the slices."""
    pp = len(steps)
    first = [s for rank in steps.values() for step in rank[:1] for s in step]
    chunks = 1 + max(s["args"]["chunk"] for s in first)
    m = 1 + max(s["args"]["mb"] for s in first)
    names = {s["name"] for s in first}
    rank0 = [s["name"] for s in steps[min(steps)][0]]
    if "W" in names:
        schedule = "zero_bubble"
    elif chunks > pp:
        schedule = "interleaved_1f1b"
    elif rank0.index("B") >= m:  # every forward before the first backward
        schedule = "gpipe"
    else:
        schedule = "1f1b"
    return schedule, pp, chunks // pp, m


def measure(path, skip):
    events = load(path)
    steps, receives = split_steps(events)
    n = min(len(v) for v in steps.values())
    result = {"steps": [], "costs": {}}
    costs = {}
    waited = other = gaps = 0.0
    for k in range(skip, n):
        spans, busy = [], {}
        for rank, per_step in steps.items():
            busy[rank] = 0.0
            w, o, g = between_actions(per_step[k], rank, receives)
            waited, other, gaps = waited + w, other + o, gaps + g
            for s in per_step[k]:
                start, dur = pure_compute(s, rank, receives)
                spans.append((start, start + dur))
                busy[rank] += dur
                costs.setdefault(s["name"], []).append(dur)
        window = max(e for _, e in spans) - min(b for b, _ in spans)
        result["steps"].append({"window_us": window, "busy_us": busy,
                                "bubble": 1 - sum(busy.values()) / (len(busy) * window)})
    # Per chunk: a slice is one micro-batch through one chunk.
    result["costs"] = {name: statistics.mean(v) for name, v in costs.items()}
    rank_steps = max(1, (n - skip) * len(steps))
    result["between_actions"] = {"receive_wait_ms_per_rank_step": waited / rank_steps / 1e3,
                                 "other_ms_per_rank_step": other / rank_steps / 1e3,
                                 "other_us_per_action": other / gaps if gaps else 0.0}
    result["shape"] = shape(steps)
    metrics = os.path.join(os.path.dirname(path), "metrics.jsonl")
    if os.path.exists(metrics):
        walls = [json.loads(l)["step_s"] for l in open(metrics) if '"loss"' in l]
        result["step_s"] = walls[skip:n]
    return result


def simulate(dtrain, schedule, pp, v, m, costs=None, trace=None):
    """(simulated bubble, closed-form bubble, the formula) from `dtrain pipeline show`, for `costs`
    (microseconds by action) or, given `trace`, for the mean raw slices `pipeline show --trace` takes."""
    if trace:
        given = ["--trace", trace]
    else:
        f, b = costs["F"], costs.get("B", costs.get("I", 0) + costs.get("W", 0))
        given = ["--costs", f"F={f:.0f},B={b:.0f}" + (f",W={costs['W']:.0f}" if "W" in costs else "")]
    text = subprocess.run([dtrain, "pipeline", "show", "--pp", str(pp), "--micro-batches", str(m), "--schedule", schedule,
                           "--virtual-stages", str(v), *given], check=True, capture_output=True, text=True).stdout
    # The closed form reads "n/a" where it does not hold (zero_bubble with F, I and W unequal).
    found = re.search(r"bubble ([0-9.]+)% simulated, (?:([0-9.]+)%|n/a) by (\S+)", text)
    if not found:
        raise SystemExit(f"dtrain pipeline show printed no bubble line:\n{text}")
    closed = float("nan") if found.group(2) is None else float(found.group(2)) / 100
    return float(found.group(1)) / 100, closed, found.group(3).rstrip(";,")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("trace")
    ap.add_argument("--skip", type=int, default=1, help="warm-up steps left out")
    ap.add_argument("--dtrain", default="build/dtrain", help="the dtrain binary whose `pipeline show` simulates")
    ap.add_argument("--table-row", action="store_true", help="print one JSON line instead of the table")
    a = ap.parse_args()
    r = measure(a.trace, a.skip)
    schedule, pp, v, m = r["shape"]
    bubbles = [s["bubble"] for s in r["steps"]]
    measured = statistics.median(bubbles)
    simulated, closed, formula = simulate(a.dtrain, schedule, pp, v, m, r["costs"])
    raw, _, _ = simulate(a.dtrain, schedule, pp, v, m, trace=a.trace)
    windows = [s["window_us"] / 1e6 for s in r["steps"]]
    outside = [max(0.0, w - x) / w for w, x in zip(r.get("step_s", []), windows)]
    row = {"schedule": schedule, "pp": pp, "virtual_stages": v, "micro_batches": m, "measured": measured,
           "measured_min": min(bubbles), "measured_max": max(bubbles), "simulated": simulated, "simulated_raw_slices": raw, "closed_form": closed,
           "formula": formula, "costs_ms": {k: x / 1e3 for k, x in r["costs"].items()},
           "outside_window": statistics.median(outside) if outside else None, "steps": len(bubbles),
           "between_actions": r["between_actions"]}
    if a.table_row:
        print(json.dumps(row))
        return
    print(f"{schedule}: pp {pp}, {v} virtual stage(s), {m} micro-batches; {len(bubbles)} step(s) after {a.skip} skipped")
    print("mean compute per chunk and micro-batch (ms, any receive wait inside a slice taken off): " +
          ", ".join(f"{k} {x / 1e3:.1f}" for k, x in sorted(r["costs"].items())))
    print("| step | pipeline window (s) | idle per rank (s) | bubble measured |")
    print("|---:|---:|---|---:|")
    for k, s in enumerate(r["steps"], a.skip + 1):
        idle = "/".join(f"{(s['window_us'] - b) / 1e6:.2f}" for _, b in sorted(s["busy_us"].items()))
        print(f"| {k} | {s['window_us'] / 1e6:.2f} | {idle} | {100 * s['bubble']:.1f}% |")
    print()
    print("| bubble measured (median, min-max) | simulated, mean costs | simulated, each chunk's costs (pipeline show --trace) "
          "| closed form | measured / simulated (each chunk's) |")
    print("|---:|---:|---:|---:|---:|")
    print(f"| {100 * measured:.1f}% ({100 * min(bubbles):.1f}-{100 * max(bubbles):.1f}%) | {100 * simulated:.1f}% | {100 * raw:.1f}% | "
          f"{'n/a' if closed != closed else f'{100 * closed:.1f}%'} {formula} | {measured / raw:.2f} |")
    b = r["between_actions"]
    print(f"between a rank's compute slices, per rank and step: {b['receive_wait_ms_per_rank_step']:.1f} ms blocked on a "
          f"receive, {b['other_ms_per_rank_step']:.1f} ms in the executor otherwise ({b['other_us_per_action']:.0f} us per action)")
    if outside:
        print(f"outside the pipeline's window (all-reduces, grad norm, optimizer): {100 * statistics.median(outside):.1f}% of the step (median)")


if __name__ == "__main__":
    sys.exit(main())
