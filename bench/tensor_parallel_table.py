"""Reads what bench/tensor_parallel.sh left in its output directory and prints its table: per layout,
dtrain and each PyTorch run (eager and compiled, as shipped and tuned), with tokens/s, the ratio to
dtrain, peak RSS per rank and the share of step time in communication per rank, and under tp dtrain
with the input gradient's collective waited for before the weight-gradient GEMMs (what the overlap
hides); then dtrain against the fastest PyTorch run of each layout. A PyTorch run that printed no result is a row with its
error's first line. Each row is its best round.
Usage: tensor_parallel_table.py OUT WARMUP"""
import glob
import json
import re
import sys

from train_table import dtrain_result

LAYOUTS = (("dp", "dp 2 (DDP)"), ("tp", "tp 2"), ("tp_sp", "tp 2 + SP"))


def dtrain_comm_share(run_dir, warmup):
    """The share of the timed steps' wall time dtrain's metrics put in communication, or None where
    the run reports none: under dp the gradient reduction (comm_ms, hidden or not), under tp the time
    the step waited for tp's collectives (model_parallel_wait_ms: what no computation hid)."""
    steps = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl") if '"loss"' in line]
    timed = [s for s in steps if s["step"] > warmup]
    for key in ("comm_ms", "model_parallel_wait_ms"):
        if timed and all(key in s for s in timed):
            return sum(s[key] for s in timed) / 1e3 / sum(s["step_s"] for s in timed)
    return None


def dtrain_best(out, layout, warmup):
    """The best round that finished: tokens/s, peak RSS per rank, communication share."""
    runs = []
    for run in glob.glob(f"{out}/dtrain_{layout}_[0-9]*/"):
        try:
            tps, _, _, rss = dtrain_result(run, warmup)
        except (OSError, AttributeError, IndexError, ValueError):  # the run failed before its summary
            continue
        runs.append((tps, rss, dtrain_comm_share(run, warmup)))
    return max(runs, key=lambda r: r[0]) if runs else None


def dtrain_error(out, layout):
    """The first error line of a failed dtrain run's output."""
    for path in sorted(glob.glob(f"{out}/dtrain_{layout}_[0-9]*.log")):
        for line in open(path, errors="replace"):
            if "error" in line.lower():
                return line.strip()
    return "no result and no error line in its output"


def error_line(out, name):
    """The first line of the error a failed PyTorch run printed (the exception's own line)."""
    paths = sorted(glob.glob(f"{out}/{name}_*_rank*.err"))
    if not paths:
        return "not run"
    for path in paths:
        for line in open(path, errors="replace"):
            if re.match(r"^[A-Za-z_][\w.]*(Error|Exception|Failed|Unsupported)\b.*:", line):
                return line.strip()
    return "no result and no exception line in its stderr"


def pytorch_best(out, name):
    """The best round's JSON line, or None."""
    try:
        runs = [json.loads(line) for line in open(f"{out}/{name}.json") if line.startswith("{")]
    except FileNotFoundError:
        return None
    return max(runs, key=lambda r: r["tokens_per_s"]) if runs else None


def shares(values):
    return "n/a" if values is None else "/".join(f"{100 * v:.1f}%" for v in values)


def main():
    out, warmup = sys.argv[1], int(sys.argv[2])
    print("| layout | framework | tokens/s | dtrain / this | peak RSS per rank (MiB) | communication share of step per rank |")
    print("|---|---|---:|---:|---:|---:|")
    summary = []
    for layout, label in LAYOUTS:
        mine = dtrain_best(out, layout, warmup)
        if mine is None:
            print(f"| {label} | dtrain | failed: {dtrain_error(out, layout)} | | | |")
            continue
        tps, rss, comm = mine
        print(f"| {label} | dtrain | {tps:.0f} | 1.00x | {'/'.join(map(str, rss))} | "
              f"{'not reported' if comm is None else f'{100 * comm:.1f}%'} |")
        waited = dtrain_best(out, f"{layout}_no_overlap", warmup) if layout != "dp" else None
        if waited:
            print(f"| {label} | dtrain, input-gradient overlap off | {waited[0]:.0f} | {tps / waited[0]:.2f}x | "
                  f"{'/'.join(map(str, waited[1]))} | {'not reported' if waited[2] is None else f'{100 * waited[2]:.1f}%'} |")
        fastest = None
        for mode, mode_label in (("eager", "eager"), ("compile", "torch.compile")):
            for setting in ("shipped", "tuned"):
                name = f"pytorch_{layout}_{mode}_{setting}"
                best = pytorch_best(out, name)
                framework = f"PyTorch {mode_label}, {'as shipped' if setting == 'shipped' else 'tuned'}"
                if best is None:
                    print(f"| {label} | {framework} | failed: {error_line(out, name)} | | | |")
                    continue
                peer = best["tokens_per_s"]
                print(f"| {label} | {framework} | {peer:.0f} | {tps / peer:.2f}x | "
                      f"{'/'.join(str(round(x)) for x in best['peak_rss_mib'])} | {shares(best['comm_share'])} |")
                if fastest is None or peer > fastest[0]:
                    fastest = (peer, framework)
        if fastest:
            summary.append(f"{label}: dtrain {tps:.0f} tok/s, {tps / fastest[0]:.2f}x the fastest PyTorch run ({fastest[1]}, {fastest[0]:.0f} tok/s)")
    print()
    for line in summary:
        print(line)


if __name__ == "__main__":
    main()
