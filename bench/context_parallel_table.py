"""Reads what bench/context_parallel.sh left in its output directory and prints its tables: tokens/s
(the median of the rounds), the ratio to dp 2 on the same two ranks and to 1 rank x 2 threads, peak RSS
per rank and, for the cp rows, the share of rank 0's step blocked in the cp group (metrics.jsonl's
model_parallel_wait_ms: ring hops or Ulysses' all-to-alls); the errors PyTorch's context_parallel gave;
then the ring's hidden traffic per round (bench/ring_overlap.py).
Usage: context_parallel_table.py OUT WARMUP SEQ"""
import glob
import json
import re
import statistics
import sys

from ring_overlap import ring_overlap, table
from train_table import dtrain_result

DTRAIN = (("1x2", "dtrain cp 1", "1 x 2"), ("dp2", "dtrain dp 2 (cp 1)", "2 x 1"),
          ("ring", "dtrain cp 2, ring", "2 x 1"), ("ulysses", "dtrain cp 2, Ulysses", "2 x 1"))
PEER = (("eager", "PyTorch whole sequence, eager, tuned"), ("compile", "PyTorch whole sequence, torch.compile, tuned"))


def cp_wait_share(run_dir, warmup):
    steps = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl") if '"loss"' in line]
    timed = [s for s in steps if s["step"] > warmup]
    if not timed or not all("model_parallel_wait_ms" in s for s in timed):
        return None
    return sum(s["model_parallel_wait_ms"] for s in timed) / 1e3 / sum(s["step_s"] for s in timed)


def dtrain_runs(out, name, warmup):
    runs = []
    for run in sorted(glob.glob(f"{out}/dtrain_{name}_[0-9]*/")):
        try:
            tps, _, _, rss = dtrain_result(run, warmup)
        except (OSError, AttributeError, IndexError, ValueError):  # the run failed before its summary
            continue
        runs.append((tps, rss, cp_wait_share(run, warmup), run))
    return runs


def peer_runs(out, name):
    try:
        lines = [json.loads(line) for line in open(f"{out}/{name}.json") if line.startswith("{")]
    except FileNotFoundError:
        return []
    return [(r["tokens_per_s"], r["peak_rss_mib"], None, None) for r in lines if "tokens_per_s" in r]


def median_run(runs):
    """The run whose tokens/s is the median (the lower middle one of an even count)."""
    ordered = sorted(runs, key=lambda r: r[0])
    return ordered[(len(ordered) - 1) // 2]


def message_time_us(out):
    """The broadcast row of bench-comm: the message size and its time in microseconds."""
    for line in open(f"{out}/bench_comm.txt"):
        fields = line.split()
        if len(fields) >= 3 and fields[0].isdigit():
            return int(fields[0]), float(fields[2])
    raise SystemExit(f"{out}/bench_comm.txt: no broadcast row")


def main():
    out, warmup, seq = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    rows = [(label, shape, dtrain_runs(out, name, warmup)) for name, label, shape in DTRAIN]
    rows += [(label, "1 x 2", peer_runs(out, f"pytorch_full_{mode}")) for mode, label in PEER]
    medians = {label: statistics.median(r[0] for r in runs) for label, _, runs in rows if runs}
    print(f"seq {seq}, micro-batch 1; tokens/s the median of the rounds, each over its timed steps")
    print("| layout | ranks x threads | tokens/s | rounds (tokens/s each) | vs dp 2 | vs 1 rank x 2 threads | "
          "peak RSS per rank (MiB) | rank 0 blocked in cp (share of step) |")
    print("|---|---|---:|---|---:|---:|---:|---:|")
    dp2, one = medians.get("dtrain dp 2 (cp 1)"), medians.get("dtrain cp 1")
    for label, shape, runs in rows:
        if not runs:
            print(f"| {label} | {shape} | no run | | | | | |")
            continue
        tps = medians[label]
        _, rss, share, _ = median_run(runs)
        each = ", ".join(f"{r[0]:,.0f}" for r in runs)
        print(f"| {label} | {shape} | {tps:,.0f} | {each} | {tps / dp2:.2f}x | {tps / one:.2f}x | "
              f"{'/'.join(str(round(x)) for x in rss)} | {'' if share is None else f'{100 * share:.1f}%'} |"
              if dp2 and one else f"| {label} | {shape} | {tps:,.0f} | {each} | | | | |")

    print()
    print("PyTorch 2.11 context_parallel (ring over SDPA), cp 2 on Gloo, by SDPA route:")
    for route in ("default", "math", "efficient"):
        try:
            results = [json.loads(line) for line in open(f"{out}/pytorch_cp_{route}.json") if line.startswith("{")]
        except FileNotFoundError:
            results = []
        errors = sorted({r["error"] for r in results if "error" in r})
        ran = [r for r in results if "tokens_per_s" in r]
        said = "; ".join(errors) if errors else (f"ran: {ran[0]['tokens_per_s']:,.0f} tokens/s" if ran else "no result")
        print(f"- {route}: {said}")

    size, broadcast_us = message_time_us(out)
    print()
    print(f"ring traffic hidden behind compute (bench/ring_overlap.py), per timed step, rank 0/rank 1; one message is {size} "
          f"bytes, which dtrain bench-comm broadcasts between the two ranks in {broadcast_us:.0f} us")
    for tps, _, _, run in dtrain_runs(out, "ring", warmup):
        try:
            ranks, t_msg = ring_overlap(f"{run}/trace.json", warmup)
        except (OSError, ValueError):
            continue
        print(f"\nround {re.search(r'_([0-9]+)/$', run).group(1)}, {tps:,.0f} tokens/s; "
              f"transfer time from the trace's last dk/dv hops {t_msg:.0f} us:")
        print("\n".join(table(ranks)))

if __name__ == "__main__":
    main()
