"""Reads what bench/train.sh left in its output directory and prints the comparison table:
tokens/s, ratios to PyTorch as shipped and to PyTorch tuned (the fastest of its runs: as shipped,
with glibc malloc keeping freed memory as dtrain does, and with that plus OMP_WAIT_POLICY=PASSIVE),
MFU against the matmul peak dtrain measured at start-up (the highest of its rounds, the same peak
for all), and peak RSS per rank. Each row is its best round: on a shared machine a slow round says
something about the machine, not the framework."""
import glob
import json
import re
import sys


def dtrain_result(run_dir, warmup):
    steps = [json.loads(line) for line in open(f"{run_dir}/metrics.jsonl") if '"loss"' in line]
    timed = [s for s in steps if s["step"] > warmup]
    tokens_per_step = timed[0]["tokens_per_s"] * timed[0]["step_s"]
    tps = tokens_per_step * len(timed) / sum(s["step_s"] for s in timed)
    log0 = open(f"{run_dir}/rank-0.log").read()
    # The start-up peak, or the rate the run reached if it outran that (the run then says so).
    peaks = re.findall(r"matmul peak ([0-9.]+) GFLOP/s|MFU is now against ([0-9.]+) GFLOP/s", log0)
    peak = max(float(a or b) for a, b in peaks) * 1e9
    params = int(re.search(r"\((\d+) parameters\)", log0).group(1))
    rss = []
    for path in sorted(glob.glob(f"{run_dir}/rank-*.log")):
        rss.append(int(re.search(r"peak RSS (\d+) MiB", open(path).read()).group(1)))
    return tps, peak, params, rss


def main():
    out, warmup = sys.argv[1], int(sys.argv[2])
    layers, d, seq = 6, 384, 256
    rows = []
    for tag in ("1x2", "2x1"):
        dtrain_runs = [dtrain_result(d, warmup) for d in sorted(glob.glob(f"{out}/dtrain_{tag}_*")) if not d.endswith(".log")]
        tps, _, params, rss = max(dtrain_runs)
        peak = max(r[1] for r in dtrain_runs)
        flops_per_token = 6 * params + 12 * layers * seq * d
        ranks, threads = tag.split("x")
        runs = [("dtrain", tps, rss)]
        for setting, label in (("shipped", "PyTorch as shipped"), ("malloc", "PyTorch, malloc kept"),
                               ("malloc+passive", "PyTorch, malloc kept + OMP_WAIT_POLICY=PASSIVE")):
            results = [json.loads(line) for line in open(f"{out}/pytorch_{setting}_{tag}.json").read().strip().splitlines()]
            best = max(results, key=lambda r: r["tokens_per_s"])
            runs.append((label, best["tokens_per_s"], best["peak_rss_mib"]))
        base, tuned = runs[1][1], max(r[1] for r in runs[1:])
        for name, t, r in runs:
            rows.append((f"{ranks} rank x {threads} thr", name, t, t / base, t / tuned, 100 * flops_per_token * t / peak,
                         "/".join(str(round(x)) for x in r), peak / 1e9))
    print("| layout | framework | tokens/s | vs PyTorch as shipped | vs PyTorch tuned | MFU | peak RSS per rank (MiB) | matmul peak (GFLOP/s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for layout, name, t, ratio, ratio_tuned, mfu, rss, peak in rows:
        print(f"| {layout} | {name} | {t:,.0f} | {ratio:.2f}x | {ratio_tuned:.2f}x | {mfu:.1f}% | {rss} | {peak:.0f} |")

if __name__ == "__main__":
    main()
