"""A projection of step time and memory per rank for a Llama-1B and a Llama-8B shape under every
3D layout pp x dp x tp of 8 to 64 ranks (8 per node) and each pipeline schedule, from costs measured
on this machine, saying which layout and schedule it picks and why. Standard library only.

  compute      a dtrain pipeline run's trace (bench/pipeline_parallel.sh's pp 2 1f1b run by default):
               the mean F and B of a chunk of the 8-layer benchmark GPT (d 384, s 256, 2 sequences
               per micro-batch), receive waits taken off (bench/pipeline_bubble.py), give the rate
               a rank computes a block's forward and backward FLOPs at; a zero_bubble trace beside
               it gives the weight gradient's share of backward
  pipeline     `dtrain pipeline show` simulates each schedule with those costs scaled to the
               layout's chunk, every cross-rank dependency paying one point-to-point transfer: its
               step (makespan), bubble and peak micro-batches in flight per rank
  collectives  `dtrain bench-comm` tables (bus bandwidth by size, 2 ranks): within a node the
               shared-memory backend's, across nodes Gloo's (TCP; measured over loopback here, a
               stand-in for a NIC at least that fast); broadcast at 2 ranks is a point-to-point copy
  optimizer    build/bench_optimizer_step: dtrain's fused AdamW pass, per parameter

Layout: tp innermost (within a node), pp outermost, as dtrain's mesh orders them; a dp group spans
nodes once tp x dp > 8, pipeline neighbours sit on different nodes once tp x dp >= 8. The model's
equations and what it leaves out are in docs/benchmarks.md ("Pipeline parallelism").
--rank-gflops, --intra-gbps and --inter-gbps replace a measurement by an assumption (a GPU-class
rank and its links, say), as --adamw-ns does the optimizer's time per parameter; the output says
which it used. Every layout with dp > 1 is projected with DDP and with ZeRO-1 (optimizer states
sharded over dp: 8 + 8/dp bytes a parameter, the AdamW pass a dp-th).
Usage: python3 bench/pp_projection.py [--trace T] [--zb-trace T] [--comm-intra F] [--comm-inter F]
                                      [--rank-memory-gib 32] [--ranks 8,16,32,64] [--rank-gflops G]
                                      [--intra-gbps B] [--inter-gbps B]"""
import argparse
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from comm_table import BusBandwidth, parse as parse_comm_table  # noqa: E402
from pipeline_bubble import measure  # noqa: E402

BYTES = 4  # fp32 weights, gradients and activations, as the CPU runs train
PER_NODE = 8
# The benchmark GPT the trace measured: one chunk of pp 2 is 4 blocks, a micro-batch 2 sequences.
BENCH = {"d": 384, "ff": 1536, "seq": 256, "kv": 384, "blocks_per_chunk": 4, "tokens": 2 * 256}
MODELS = {
    # Llama 3.2 1B (tied embeddings) and Llama 3.1 8B (untied); global batch about 1M tokens a step.
    "llama-1b": {"layers": 16, "d": 2048, "heads": 32, "kv_heads": 8, "ff": 8192, "vocab": 128256, "seq": 2048,
                 "tied": True, "sequences": 512},
    "llama-8b": {"layers": 32, "d": 4096, "heads": 32, "kv_heads": 8, "ff": 14336, "vocab": 128256, "seq": 8192,
                 "tied": False, "sequences": 128},
}
SCHEDULES = (("gpipe", 1), ("1f1b", 1), ("interleaved_1f1b", 2), ("zero_bubble", 1))


def block_flops_per_token(d, ff, kv_width, seq, swiglu):
    """Forward FLOPs of one block per token: 2 per weight, and causal attention's two products
    (4·s·d, the usual count of 12·L·s·d per token for forward and backward)."""
    weights = d * d * 2 + 2 * d * kv_width + (3 if swiglu else 2) * d * ff
    return 2 * weights + 4 * seq * d


def measured_rates(trace, zb_trace):
    """(forward FLOP/s, backward FLOP/s, the weight gradient's share of backward) of one rank."""
    m = measure(trace, 1)
    flops = BENCH["blocks_per_chunk"] * BENCH["tokens"] * block_flops_per_token(BENCH["d"], BENCH["ff"], BENCH["kv"], BENCH["seq"], False)
    costs = m["costs"]  # microseconds per chunk and micro-batch
    w_share = 0.5
    if zb_trace and os.path.exists(zb_trace):
        z = measure(zb_trace, 1)["costs"]
        w_share = z["W"] / (z["I"] + z["W"])
    return flops / (costs["F"] / 1e6), 2 * flops / (costs["B"] / 1e6), w_share


class Link(BusBandwidth):
    """Time of a collective or a point-to-point copy of S bytes from a bench-comm table's bus
    bandwidth at the nearest sizes (log-interpolated, held at the ends), with nccl-tests' factors."""

    def all_reduce(self, size, n):
        return 0.0 if n == 1 else size * 2 * (n - 1) / n / self.busbw("all_reduce", size)

    def p2p(self, size):
        return size / self.busbw("broadcast", size)


class AssumedLink(Link):
    """A link of one bus bandwidth at every size (--intra-gbps, --inter-gbps: an assumption, not a
    measurement)."""

    def __init__(self, gbps):
        self.table = {op: [(1, gbps * 1e9)] for op in ("all_reduce", "broadcast")}


def comm_table(path, backend):
    if path is None:
        out = f"bench/out/pp_projection_comm_{backend}.txt"
        text = subprocess.run(["build/dtrain", "launch", "--nproc-per-node", "2", "--", "build/dtrain", "bench-comm", "-b", "262144",
                               "-e", "268435456", "-n", "5", "--backend", backend, "--ops", "all_reduce,broadcast"],
                              check=True, capture_output=True, text=True).stdout
        os.makedirs("bench/out", exist_ok=True)
        with open(out, "w") as f:
            f.write("".join(line.removeprefix("[rank 0] ") + "\n" for line in text.splitlines() if line.startswith("[rank 0] ")))
        path = out
    return Link(parse_comm_table(path))


def adamw_per_parameter():
    text = subprocess.run(["build/bench_optimizer_step", "--preset", "gpt2-124m", "--threads", "1", "--steps", "3"],
                          check=True, capture_output=True, text=True).stdout
    m = re.search(r"(\d+) parameters, 1 thread\(s\): median AdamW step ([0-9.]+) ms", text)
    return float(m.group(2)) / 1e3 / int(m.group(1))


def show(schedule, pp, v, m, f, b, w, comm):
    """dtrain pipeline show's (step, bubble, peak chunk-micro-batches in flight on any rank), costs in ms."""
    costs = f"F={f:.4f},B={b:.4f},comm={comm:.4f}" + (f",W={w:.4f}" if schedule == "zero_bubble" else "")
    text = subprocess.run(["build/dtrain", "pipeline", "show", "--pp", str(pp), "--micro-batches", str(m), "--schedule", schedule,
                           "--virtual-stages", str(v), "--costs", costs], check=True, capture_output=True, text=True).stdout
    found = re.search(r"bubble ([0-9.]+)% simulated.*step ([0-9.e+]+) time unit", text)
    peaks = [int(x) for x in re.findall(r"^\s+\d+\s+(\d+)\s*$", text.split("peak micro-batches in flight")[1], re.M)]
    return float(found.group(2)) / 1e3, float(found.group(1)) / 100, max(peaks)


def project(model, ranks, rates, links, adam_s, memory_gib):
    fwd_rate, bwd_rate, w_share = rates
    intra, inter = links
    L, d, ff, V, s = model["layers"], model["d"], model["ff"], model["vocab"], model["seq"]
    kv_width = model["kv_heads"] * d // model["heads"]
    layer_params = 2 * d * d + 2 * d * kv_width + 3 * d * ff + 2 * d
    embedding = V * d
    rows = []
    for tp in (1, 2, 4, 8):
        for pp in (1, 2, 4, 8, 16):
            if ranks % (tp * pp) or pp > L:
                continue
            dp = ranks // (tp * pp)
            if model["sequences"] % dp:
                continue
            m = model["sequences"] // dp  # micro-batches of one sequence per pipeline
            dp_link = inter if tp * dp > PER_NODE else intra
            pp_link = inter if tp * dp >= PER_NODE else intra
            act = s * d * BYTES  # what a stage hands on, per micro-batch
            # Per block and micro-batch: forward and backward compute, split evenly over tp, plus tp's
            # two forward all-reduces (the backward ones hidden behind the weight-gradient GEMMs).
            block_f = s * block_flops_per_token(d, ff, kv_width, s, True) / fwd_rate / tp + 2 * intra.all_reduce(act, tp)
            block_b = 2 * s * block_flops_per_token(d, ff, kv_width, s, True) / bwd_rate / tp
            head_f = s * 2 * V * d / fwd_rate / tp
            for schedule, v in SCHEDULES:
                if pp == 1 and schedule != "1f1b":
                    continue
                chunks = pp * v
                if L % chunks:
                    continue
                per_chunk = L // chunks
                # The head's work lands on the last chunk; the simulator takes one cost per action,
                # so it is spread over the chunks (a balanced split gives the last chunk fewer blocks).
                f = per_chunk * block_f + head_f / chunks
                b = per_chunk * block_b + 2 * head_f / chunks
                makespan, bubble, in_flight = show(schedule, pp, v, m, 1e3 * f, 1e3 * b, 1e3 * w_share * b,
                                                   1e3 * pp_link.p2p(act) if pp > 1 else 0.0)
                stage_params = (L // pp) * layer_params / tp + embedding / tp * (1 if pp > 1 else (1 if model["tied"] else 2))
                # Once per step, after the last micro-batch: DDP's all-reduce, or under ZeRO-1 a
                # reduce-scatter and the updated parameters' all-gather (the same bytes).
                grad_reduce = dp_link.all_reduce(BYTES * stage_params, dp)
                tied = inter.all_reduce(BYTES * embedding / tp, 2) if model["tied"] and pp > 1 else 0.0
                # fp32 weights and gradients, AdamW's two moments; activations per chunk-micro-batch
                # as dtrain keeps them (norms' inputs and outputs, q and attention output, k and v,
                # SwiGLU's four), and the logits with their gradient on the last stage.
                per_layer = 4 * d + 2 * d / tp + 2 * kv_width / tp + 4 * ff / tp
                activations = in_flight * per_chunk * s * per_layer * BYTES + 2 * s * V / tp * BYTES
                for zero1 in ((False, True) if dp > 1 else (False,)):
                    optimizer = stage_params * adam_s / (dp if zero1 else 1)
                    states = stage_params * (8 + 8 / dp if zero1 else 16)
                    step = makespan + grad_reduce + tied + optimizer
                    total = states + activations
                    rows.append({"pp": pp, "dp": dp, "tp": tp, "zero1": zero1, "schedule": schedule, "v": v, "m": m, "step": step,
                                 "makespan": makespan, "bubble": bubble, "comm": grad_reduce + tied, "optimizer": optimizer,
                                 "tokens_per_s": model["sequences"] * s / step, "states": states, "activations": activations,
                                 "total": total, "fits": total <= memory_gib * 2**30, "in_flight": in_flight})
    return rows


def layout(r):
    return f"pp {r['pp']} x dp {r['dp']}{' (ZeRO-1)' if r['zero1'] else ''} x tp {r['tp']}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", default="bench/out/pipeline_parallel/dtrain_pp2_1f1b_1/trace.json")
    ap.add_argument("--zb-trace", default="bench/out/pipeline_parallel/dtrain_pp2_zero_bubble_1/trace.json")
    ap.add_argument("--comm-intra", help="a bench-comm table (rank 0's lines) within a node; measured here on shared memory if absent")
    ap.add_argument("--comm-inter", help="a bench-comm table across nodes; measured here on Gloo if absent")
    ap.add_argument("--rank-memory-gib", type=float, default=32, help="memory one rank may use")
    ap.add_argument("--ranks", default="8,16,32,64")
    ap.add_argument("--rank-gflops", type=float, help="assume this forward and backward rate per rank instead of the trace's")
    ap.add_argument("--intra-gbps", type=float, help="assume this bus bandwidth within a node instead of a bench-comm table")
    ap.add_argument("--inter-gbps", type=float, help="assume this bus bandwidth across nodes instead of a bench-comm table")
    ap.add_argument("--adamw-ns", type=float, help="assume this AdamW time per parameter instead of bench_optimizer_step's")
    a = ap.parse_args()
    paths = [os.path.abspath(p) if p else None for p in (a.trace, a.zb_trace, a.comm_intra, a.comm_inter)]
    os.chdir(ROOT)
    rates = measured_rates(paths[0], paths[1])
    if a.rank_gflops:
        rates = (a.rank_gflops * 1e9, a.rank_gflops * 1e9, rates[2])
    links = (AssumedLink(a.intra_gbps) if a.intra_gbps else comm_table(paths[2], "auto"),
             AssumedLink(a.inter_gbps) if a.inter_gbps else comm_table(paths[3], "gloo"))
    adam_s = a.adamw_ns / 1e9 if a.adamw_ns else adamw_per_parameter()
    print(f"A rank computes forward at {rates[0] / 1e9:.1f} GFLOP/s and backward at {rates[1] / 1e9:.1f} GFLOP/s "
          f"({'assumed' if a.rank_gflops else 'measured: dtrain pipeline trace'}), the weight gradient {100 * rates[2]:.0f}% of backward; AdamW {adam_s * 1e9:.2f} ns per parameter"
          f"{' (assumed)' if a.adamw_ns else ''}")
    for name, link in (("within a node (" + ("assumed" if a.intra_gbps else "measured: shared memory") + ")", links[0]),
                       ("across nodes (" + ("assumed" if a.inter_gbps else "measured: Gloo, TCP") + ")", links[1])):
        print(f"{name}: point-to-point {link.busbw('broadcast', 16 << 20) / 1e9:.2f} GB/s, all-reduce bus bandwidth "
              f"{link.busbw('all_reduce', 256 << 20) / 1e9:.2f} GB/s at 256 MiB")
    for model_name, model in MODELS.items():
        print(f"\n{model_name}: {model['layers']} layers, d {model['d']}, ff {model['ff']}, vocab {model['vocab']}, "
              f"{'tied' if model['tied'] else 'untied'}, {model['sequences']} sequences of {model['seq']} per step; "
              f"{a.rank_memory_gib:g} GiB per rank, {PER_NODE} ranks per node")
        print("| ranks | picked layout | schedule | micro-batches | step (s) | tokens/s | bubble | grad all-reduce + tied (s) | "
              "memory / rank (GiB) | next best that fits | fastest overall |")
        print("|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|")
        by_ranks = {}
        for n in (int(x) for x in a.ranks.split(",")):
            rows = by_ranks[n] = project(model, n, rates, links, adam_s, a.rank_memory_gib)
            fitting = sorted((r for r in rows if r["fits"]), key=lambda r: r["step"])
            fastest = min(rows, key=lambda r: r["step"])
            fast_text = (f"{layout(fastest)} {fastest['schedule']}: {fastest['step']:.3g} s, {fastest['total'] / 2**30:.0f} GiB"
                         if fastest is not (fitting[0] if fitting else None) else "the same")
            if not fitting:
                print(f"| {n} | none fits | | | | | | | | | {fast_text} |")
                continue
            best = fitting[0]
            runner = next((r for r in fitting[1:] if layout(r) != layout(best)), None)
            runner_text = (f"{layout(runner)} {runner['schedule']}: {runner['step']:.3g} s ({runner['step'] / best['step']:.2f}x), "
                           f"bubble {100 * runner['bubble']:.0f}%, {runner['total'] / 2**30:.0f} GiB" if runner else "")
            print(f"| {n} | {layout(best)} | {best['schedule']} | {best['m']} | {best['step']:.3g} | {best['tokens_per_s']:.0f} | "
                  f"{100 * best['bubble']:.1f}% | {best['comm']:.1f} | {best['total'] / 2**30:.1f} | {runner_text} | {fast_text} |")
        n = int(a.ranks.split(",")[-1])
        rows = by_ranks[n]
        best = min((r for r in rows if r["fits"]), key=lambda r: r["step"], default=None)
        if best:
            print(f"\nAt {n} ranks, {layout(best)}, by schedule:")
            print("| schedule | step (s) | bubble | peak chunk-micro-batches in flight | activations / rank (GiB) | total / rank (GiB) | fits |")
            print("|---|---:|---:|---:|---:|---:|---|")
            for r in rows:
                if layout(r) == layout(best):
                    print(f"| {r['schedule']} | {r['step']:.3g} | {100 * r['bubble']:.1f}% | {r['in_flight']} | "
                          f"{r['activations'] / 2**30:.1f} | {r['total'] / 2**30:.1f} | {'yes' if r['fits'] else 'no'} |")


if __name__ == "__main__":
    main()
