"""Reads what bench/bf16_peers.sh left in its output directory and prints its table: tokens/s (best
round), the ratio to the fastest PyTorch row of the same precision and layout, and MFU against the
matmul peak dtrain's start-up probe measured on the run's own GEMM path (bf16 rows against the bf16
probe, fp32 rows against the fp32 one), counting 6·parameters + 12·layers·seq·d FLOPs per token."""
import glob
import json
import sys

from train_table import dtrain_result

PEERS = [(mode, attention) for mode in ("eager", "compile") for attention in ("sdpa", "manual")]


def best_peer(out, name):
    lines = []
    for path in glob.glob(f"{out}/{name}.json"):
        lines += [json.loads(line) for line in open(path).read().splitlines() if line.startswith("{")]
    return max(lines, key=lambda r: r["tokens_per_s"]) if lines else None


def main():
    out, warmup = sys.argv[1], int(sys.argv[2])
    layers, d, seq = 6, 384, 256
    print("| layout | framework | precision | tokens/s | vs fastest PyTorch, same precision | MFU | matmul peak (GFLOP/s) | peak RSS per rank (MiB) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for tag in ("1x2", "2x1"):
        ranks, threads = tag.split("x")
        layout = f"{ranks} rank x {threads} thr"
        for precision in ("bf16", "fp32"):
            runs = [dtrain_result(path, warmup) for path in glob.glob(f"{out}/dtrain_{precision}_{tag}_*") if not path.endswith(".log")]
            tps, _, params, rss = max(runs)
            peak = max(r[1] for r in runs)
            flops_per_token = 6 * params + 12 * layers * seq * d
            rows = [("dtrain", tps, rss)]
            for mode, attention in PEERS:
                peer = best_peer(out, f"pytorch_{precision}_{mode}_{attention}_{tag}")
                if peer:
                    label = f"PyTorch {'autocast ' if precision == 'bf16' else ''}tuned, {'eager' if mode == 'eager' else 'torch.compile'}, " \
                            f"{'SDPA' if attention == 'sdpa' else 'attention written out'}"
                    rows.append((label, peer["tokens_per_s"], peer["peak_rss_mib"]))
            fastest = max(r[1] for r in rows[1:])
            for name, t, r in rows:
                print(f"| {layout} | {name} | {precision} | {t:,.0f} | {t / fastest:.2f}x | {100 * flops_per_token * t / peak:.1f}% | "
                      f"{peak / 1e9:.0f} | {'/'.join(str(round(x)) for x in r)} |")


if __name__ == "__main__":
    main()
