"""Reads what bench/pipeline_parallel.sh left in its output directory and prints its two tables.
Speed and memory: per pp and schedule, dtrain and each PyTorch run (eager and compiled, as shipped
and tuned) with tokens/s (median over rounds, min-max), dtrain's rate over this one's (the median of
the per-round ratios: each round's runs ran next to each other) and the peak RSS per rank (median);
then dtrain against the fastest peer run of each round. Bubble: per pp and schedule, the bubble
measured from each dtrain run's trace beside the simulator's and the closed form
(bench/pipeline_bubble.py), median over rounds. A failed run is a row with its error's first line.
Usage: pipeline_parallel_table.py OUT WARMUP CORES"""
import glob
import json
import re
import statistics
import sys

from pipeline_bubble import measure, simulate
from train_table import dtrain_result

SCHEDULES = ("gpipe", "1f1b", "interleaved_1f1b", "zero_bubble")
PEERS = [(mode, setting) for mode in ("eager", "compile") for setting in ("shipped", "tuned")]


def rounds_of(out, name):
    return sorted(int(m.group(1)) for p in glob.glob(f"{out}/dtrain_{name}_*.log") if (m := re.search(r"_(\d+)\.log$", p)))


def dtrain_round(out, name, r, warmup):
    try:
        tps, _, _, rss = dtrain_result(f"{out}/dtrain_{name}_{r}", warmup)
        return tps, rss
    except (OSError, AttributeError, IndexError, ValueError):  # the run failed before its summary
        return None


def peer_round(out, peer, r):
    try:
        lines = [json.loads(l) for l in open(f"{out}/{peer}_{r}.json") if l.startswith("{")]
    except FileNotFoundError:
        return None
    return (lines[-1]["tokens_per_s"], [round(x) for x in lines[-1]["peak_rss_mib"]]) if lines else None


def error_line(paths):
    for path in sorted(paths):
        for line in open(path, errors="replace"):
            if re.search(r"(Error|Exception|error:)", line):
                return line.strip()[-160:]
    return "no result and no error line in its output" if paths else "not run"


def spread(values):
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})" if len(values) > 1 else f"{values[0]:,.0f}"


def rss_cell(runs):
    return "/".join(f"{statistics.median(col):.0f}" for col in zip(*runs))


def speed_table(out, warmup, cores):
    print("| pp | schedule | framework | tokens/s, median (min-max) | dtrain / this, median of rounds | peak RSS per rank (MiB), median |")
    print("|---:|---|---|---:|---:|---:|")
    summary = []
    for pp in (2, 4):
        pp_label = f"{pp}" if pp <= cores else f"{pp} ({pp} ranks on {cores} cores)"
        for schedule in SCHEDULES:
            name = f"pp{pp}_{schedule}"
            rounds = rounds_of(out, name)
            mine = {r: x for r in rounds if (x := dtrain_round(out, name, r, warmup))}
            if not mine:
                print(f"| {pp_label} | {schedule} | dtrain | failed: {error_line(glob.glob(f'{out}/dtrain_{name}_*.log'))} | | |")
                continue
            print(f"| {pp_label} | {schedule} | dtrain | {spread([x[0] for x in mine.values()])} | 1.00x | "
                  f"{rss_cell([x[1] for x in mine.values()])} |")
            fastest = {}
            for mode, setting in PEERS:
                peer = f"pytorch_{name}_{mode}_{setting}"
                label = f"PyTorch {'eager' if mode == 'eager' else 'torch.compile'}, {'as shipped' if setting == 'shipped' else 'tuned'}"
                runs = {r: x for r in rounds if (x := peer_round(out, peer, r))}
                if not runs:
                    if glob.glob(f"{out}/{peer}_*"):
                        print(f"| {pp_label} | {schedule} | {label} | failed: {error_line(glob.glob(f'{out}/{peer}_*.err'))} | | |")
                    continue
                ratios = [mine[r][0] / runs[r][0] for r in runs if r in mine]
                print(f"| {pp_label} | {schedule} | {label} | {spread([x[0] for x in runs.values()])} | "
                      f"{statistics.median(ratios):.2f}x | {rss_cell([x[1] for x in runs.values()])} |")
                for r, x in runs.items():
                    if r not in fastest or x[0] > fastest[r][0]:
                        fastest[r] = (x[0], label)
            ratios = [mine[r][0] / fastest[r][0] for r in fastest if r in mine]
            if ratios:
                labels = sorted({f[1] for f in fastest.values()})
                summary.append(f"pp {pp}, {schedule}: dtrain {statistics.median(ratios):.2f}x the fastest PyTorch run of each round "
                               f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x over {len(ratios)} round(s); fastest: {', '.join(labels)})")
    print()
    for line in summary:
        print(line)


def bubble_table(out, warmup):
    print("| pp | schedule | F / B (I + W) per chunk and micro-batch (ms) | bubble measured, median (min-max) | simulated, mean costs | "
          "simulated, each chunk's costs (--trace) | closed form | measured / simulated (each chunk's) | step outside the pipeline's window |")
    print("|---:|---|---|---:|---:|---:|---:|---:|---:|")
    for pp in (2, 4):
        for schedule in SCHEDULES:
            name = f"pp{pp}_{schedule}"
            rows = []
            for r in rounds_of(out, name):
                try:
                    m = measure(f"{out}/dtrain_{name}_{r}/trace.json", warmup)
                except (OSError, ValueError, KeyError):
                    continue
                sched, p, v, mbs = m["shape"]
                simulated, closed, formula = simulate("build/dtrain", sched, p, v, mbs, m["costs"])
                raw, _, _ = simulate("build/dtrain", sched, p, v, mbs, trace=f"{out}/dtrain_{name}_{r}/trace.json")
                bubbles = [s["bubble"] for s in m["steps"]]
                walls = [s["window_us"] / 1e6 for s in m["steps"]]
                outside = [max(0.0, w - x) / w for w, x in zip(m.get("step_s", []), walls)]
                rows.append({"measured": statistics.median(bubbles), "simulated": simulated, "raw": raw, "closed": closed, "formula": formula, "m": mbs,
                             "costs": m["costs"], "outside": statistics.median(outside) if outside else float("nan")})
            if not rows:
                print(f"| {pp} | {schedule} | no trace | | | | | | |")
                continue
            med = lambda key: statistics.median(x[key] for x in rows)
            costs = {k: statistics.median(x["costs"].get(k, 0) for x in rows) / 1e3 for k in ("F", "B", "I", "W")}
            cost_text = f"{costs['F']:.0f} / {costs['B']:.0f}" if costs["B"] else f"{costs['F']:.0f} / {costs['I']:.0f} + {costs['W']:.0f}"
            measured = [x["measured"] for x in rows]
            closed = f"{100 * rows[0]['closed']:.1f}% {rows[0]['formula']}"
            if rows[0]["closed"] != rows[0]["closed"]:  # NaN: zero_bubble's form holds for F = I = W only
                closed = f"{100 * (pp - 1) / (3 * rows[0]['m'] + pp - 1):.1f}% {rows[0]['formula']} at F = I = W"
            print(f"| {pp} | {schedule} | {cost_text} | {100 * med('measured'):.1f}% ({100 * min(measured):.1f}-{100 * max(measured):.1f}%) | "
                  f"{100 * med('simulated'):.1f}% | {100 * med('raw'):.1f}% | {closed} | "
                  f"{statistics.median(x['measured'] / x['raw'] for x in rows):.2f} | {100 * med('outside'):.1f}% |")


def main():
    out, warmup, cores = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    speed_table(out, warmup, cores)
    print()
    bubble_table(out, warmup)


if __name__ == "__main__":
    main()
