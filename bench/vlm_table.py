"""Reads what bench/vlm_plans.sh left in its output directory and prints its table: for each plan,
dtrain's tokens/s against PyTorch's as shipped, tuned, and tuned with torch.compile, dtrain's ratio
to the fastest of them, and the memory per rank: dtrain's peak RSS and peak tensor bytes (its
end-of-run memory record, where the CPU allocator is tracked), and the fastest peer's peak RSS.
Tokens/s is each row's best round (on a shared machine a slow round says something about the
machine); memory is each rank's median over the rounds. The header names the CPU and the
instruction sets its GEMMs may use.
Usage: python3 bench/vlm_table.py OUT WARMUP"""
import glob
import json
import statistics
import sys

from train_table import dtrain_result

PLANS = (("plan", "per-module: vision frozen, connector whole, LLM ZeRO-3 / FSDP2"),
         ("fsdp_full", "everything ZeRO-3 / FSDP2 fully_shard"),
         ("ddp", "everything DDP"))
SETTINGS = ("shipped", "tuned", "compiled")


def cpu_header():
    info = open("/proc/cpuinfo").read()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "unknown CPU")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    wanted = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile")
    return f"CPU: {model}; " + ", ".join(f"{f} {'yes' if f in flags else 'no'}" for f in wanted)


def per_rank_median(runs):
    """Each rank's median over the rounds, as 'r0/r1' (MiB)."""
    return "/".join(f"{statistics.median_low(values):.0f}" for values in zip(*runs))


def dtrain(out, plan, warmup):
    """Best round's tokens/s; per-rank medians of peak RSS and of peak tensor bytes (MiB), '-' where not measured."""
    rounds = sorted(glob.glob(f"{out}/dtrain_{plan}_*/"))
    if not rounds:
        return None
    tps = max(dtrain_result(run, warmup)[0] for run in rounds)
    rss, tensors = [], []
    for run in rounds:
        memory = [json.loads(line)["memory"] for line in open(f"{run}/metrics.jsonl") if '"memory"' in line][-1]
        rss.append([r["peak_rss_bytes"] / 2**20 for r in memory["ranks"]])
        if all("measured_peak_bytes" in r for r in memory["ranks"]):
            tensors.append([r["measured_peak_bytes"] / 2**20 for r in memory["ranks"]])
    return tps, per_rank_median(rss), per_rank_median(tensors) if tensors else "-"


def pytorch(out, plan, setting):
    """Best round's tokens/s and the per-rank median peak RSS, or None where no rank 0 reported (a failed run)."""
    try:
        runs = [json.loads(line) for line in open(f"{out}/pytorch_{plan}_{setting}.json") if line.startswith("{")]
    except FileNotFoundError:
        return None
    if not runs:
        return None
    return max(r["tokens_per_s"] for r in runs), per_rank_median([r["peak_rss_mib"] for r in runs])


def main():
    out, warmup = sys.argv[1], int(sys.argv[2])
    print(cpu_header())
    print("2 ranks x 1 thread, preset vlm-ocr, seq 80, micro-batch 16 per rank, 32 image tokens + 40 text tokens per row, fp32, AdamW")
    print()
    print("| plan | dtrain tok/s | PyTorch as shipped | PyTorch tuned | PyTorch tuned + compile | dtrain / best peer | "
          "dtrain peak RSS/rank (MiB) | dtrain peak tensors/rank (MiB) | best peer peak RSS/rank (MiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for plan, name in PLANS:
        mine = dtrain(out, plan, warmup)
        peers = {s: pytorch(out, plan, s) for s in SETTINGS}
        ran = {s: p for s, p in peers.items() if p}
        cells = [f"{peers[s][0]:.0f}" if peers[s] else "failed" for s in SETTINGS]
        best = max(ran.values(), default=None)
        tps = f"{mine[0]:.0f}" if mine else "failed"
        ratio = f"{mine[0] / best[0]:.2f}x" if mine and best else "-"
        rss, tensors = (mine[1], mine[2]) if mine else ("-", "-")
        print(f"| {name} | {tps} | {' | '.join(cells)} | {ratio} | {rss} | {tensors} | {best[1] if best else '-'} |")


if __name__ == "__main__":
    main()
