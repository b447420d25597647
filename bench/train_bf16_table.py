"""Reads what bench/train_bf16.sh left in its output directory and prints the bf16 table: tokens/s,
the ratio to PyTorch bf16 autocast tuned (same checkpointing), the step-time cost of checkpointing
against the same framework without it, MFU against the matmul peak dtrain measured (the better of
its bf16 and fp32 GEMMs), and peak RSS per rank."""
import glob
import json
import sys

from train_table import dtrain_result


def main():
    out, warmup = sys.argv[1], int(sys.argv[2])
    layers, d, seq = 6, 384, 256
    print("| layout | framework | activation checkpointing | tokens/s | vs PyTorch bf16 tuned | step time vs no AC | MFU | peak RSS per rank (MiB) |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for tag in ("1x2", "2x1"):
        ranks, threads = tag.split("x")
        layout = f"{ranks} rank x {threads} thr"
        dtrain = {key: dtrain_result(f"{out}/dtrain_{key}_{tag}", warmup)
                  for key in ("fp32_none", "bf16_none", "bf16_full", "bf16_selective")}
        params = dtrain["bf16_none"][2]
        peak = max(r[1] for r in dtrain.values())
        flops_per_token = 6 * params + 12 * layers * seq * d

        def pytorch(setting, ac):
            lines = open(f"{out}/pytorch_{setting}_{ac}_{tag}.json").read().strip().splitlines()
            best = max((json.loads(line) for line in lines), key=lambda r: r["tokens_per_s"])
            return best["tokens_per_s"], best["peak_rss_mib"]

        shipped = pytorch("shipped", "none")
        tuned = {ac: pytorch("tuned", ac) for ac in ("none", "full", "selective")}
        tuned["none"] = max(tuned["none"], shipped)
        rows = [("dtrain fp32", "none", dtrain["fp32_none"][0], None, dtrain["fp32_none"][3], None)]
        for ac in ("none", "full", "selective"):
            tps, _, _, rss = dtrain[f"bf16_{ac}"]
            rows.append(("dtrain bf16", ac, tps, tuned[ac][0], rss, dtrain["bf16_none"][0]))
        rows.append(("PyTorch bf16 autocast, as shipped", "none", shipped[0], tuned["none"][0], shipped[1], None))
        for ac in ("none", "full", "selective"):
            rows.append(("PyTorch bf16 autocast, tuned", ac, tuned[ac][0], tuned[ac][0], tuned[ac][1], tuned["none"][0]))
        for name, ac, tps, versus, rss, no_ac in rows:
            ratio = f"{tps / versus:.2f}x" if versus else ""
            cost = f"{no_ac / tps:.2f}x" if no_ac and ac != "none" else ""
            mfu = 100 * flops_per_token * tps / peak
            rss_text = "/".join(str(round(x)) for x in rss)
            print(f"| {layout} | {name} | {ac} | {tps:,.0f} | {ratio} | {cost} | {mfu:.1f}% | {rss_text} |")


if __name__ == "__main__":
    main()
