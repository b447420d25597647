"""A projection of step time and memory per rank for Llama 3.2 1B's shape (16 layers, d 2048, 32 heads,
8 kv heads, MLP 8192, vocabulary 128256, tied embeddings, sequences of 2048) on one node of 8 ranks
under data parallelism (dp 8), ZeRO-3 over 8, tensor parallelism (tp 8) and tp 8 with sequence
parallelism, fed with per-op costs measured on this machine at the shapes each layout gives a rank:

  GEMMs      build/bench_linear_gemm --layers: the three products of every linear layer at the rank's
             slice (the library dtrain's matmul_nt takes for each), at --tokens-measured tokens and
             scaled linearly to a sequence
  attention  ATen's scaled_dot_product_attention (the kernel dtrain calls), forward and backward,
             causal, at the rank's query and key/value heads
  elementwise  forward and backward of the block's RMSNorms with their residual adds, SwiGLU, RoPE
             and the cross-entropy over the rank's vocabulary slice, through ATen as dtrain runs them
  optimizer  build/bench_optimizer_step: dtrain's fused AdamW pass, per parameter
  collectives  a `dtrain bench-comm` table (all-reduce, all-gather, reduce-scatter bus bandwidth by
             size): run here on 2 ranks unless --comm names a table measured on the target node

The model's equations, and what it leaves out, are in docs/benchmarks.md ("Tensor parallelism",
"Scaling projection"). Each rank runs one thread; the global batch is 8 sequences per step: one
per rank under dp and ZeRO-3, 8 micro-batches of one under tp. Prints the measured costs, then a
table and which layout it favours.
Usage: .venv/bin/python bench/tp_projection.py [--comm FILE] [--tokens-measured 512] [--reps 2]
                                                [--rank-memory-gib 32]"""
import argparse
import math
import os
import re
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bench"))
from comm_table import BusBandwidth, parse as parse_comm_table  # noqa: E402

LAYERS, D, HEADS, KV_HEADS, FF, VOCAB, SEQ = 16, 2048, 32, 8, 8192, 128256, 2048
HEAD_DIM = D // HEADS
RANKS, GLOBAL_SEQUENCES = 8, 8
BYTES = 4  # fp32 weights, gradients and activations, as the CPU runs train
DDP_BUCKET = 25 * 2**20


def rank_layers(t):
    """The rank's linear layers under tensor parallelism t: name -> (out, in). Key/value heads are
    replicated once t exceeds them, as Megatron does."""
    q, kv = HEADS // t * HEAD_DIM, max(1, KV_HEADS // t) * HEAD_DIM
    return {"q": (q, D), "k": (kv, D), "v": (kv, D), "o": (D, q), "gate": (FF // t, D), "up": (FF // t, D),
            "down": (D, FF // t), "head": (math.ceil(VOCAB / t), D)}


def parameters():
    """(all trainable parameters, those replicated under tensor parallelism: the norms)."""
    full = rank_layers(1)
    per_layer = sum(n * k for name, (n, k) in full.items() if name != "head") + 2 * D
    return LAYERS * per_layer + VOCAB * D + D, LAYERS * 2 * D + D


def measure_gemms(t, tokens, reps):
    """name -> seconds per sequence of (output, input gradient, weight gradient) at the rank's slice."""
    specs = ",".join(f"{name}={n}x{k}" for name, (n, k) in rank_layers(t).items())
    text = subprocess.run(["build/bench_linear_gemm", "--tokens", str(tokens), "--reps", str(reps), "--rounds", "1",
                           "--layers", specs], check=True, capture_output=True, text=True).stdout
    times = {}
    for line in text.splitlines():
        cols = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cols) == 7 and cols[1] and "x" in cols[1] and cols[0] != "layer":
            ms = float(cols[4] if cols[6] == "oneDNN" else cols[3])
            times.setdefault(cols[0], []).append(ms / 1e3 * SEQ / tokens)
    return times


def timed(fn, reps):
    """The best of reps calls of fn (forward and backward), in seconds."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def forward_backward(make_inputs, op):
    def run():
        inputs = make_inputs()
        out = op(*inputs)
        out.backward(torch.ones_like(out))
    return run


def leaf(*shape):
    return torch.randn(*shape).requires_grad_()


def rope(x, cos, sin):
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)


def measure_attention(t, reps):
    h, kv = HEADS // t, max(1, KV_HEADS // t)
    op = lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=kv != h)
    return timed(forward_backward(lambda: (leaf(1, h, SEQ, HEAD_DIM), leaf(1, kv, SEQ, HEAD_DIM), leaf(1, kv, SEQ, HEAD_DIM)), op), reps)


def measure_norm_residual(reps):
    """Seconds per sequence of one RMSNorm with its residual add: the same work on every rank
    under tp, a t-th of it on each under SP."""
    w = torch.ones(D, requires_grad=True)
    return timed(forward_backward(lambda: (leaf(SEQ, D),), lambda x: x + F.rms_norm(x, (D,), w)), reps)


def measure_elementwise(t, reps):
    """Seconds per sequence at the rank's slice: (SwiGLU, RoPE on its q and k heads, the
    cross-entropy over its vocabulary slice)."""
    swiglu = timed(forward_backward(lambda: (leaf(SEQ, FF // t), leaf(SEQ, FF // t)), lambda g, u: F.silu(g) * u), reps)
    heads = HEADS // t + max(1, KV_HEADS // t)
    cos, sin = torch.randn(SEQ, HEAD_DIM // 2), torch.randn(SEQ, HEAD_DIM // 2)
    rotary = timed(forward_backward(lambda: (leaf(heads, SEQ, HEAD_DIM),), lambda x: rope(x, cos, sin)), reps)
    targets = torch.randint(0, math.ceil(VOCAB / t), (SEQ,))
    loss = timed(forward_backward(lambda: (leaf(SEQ, math.ceil(VOCAB / t)),), lambda z: F.cross_entropy(z, targets)), reps)
    return swiglu, rotary, loss


def measure_adamw_per_parameter():
    text = subprocess.run(["build/bench_optimizer_step", "--preset", "gpt2-124m", "--threads", "1", "--steps", "3"],
                          check=True, capture_output=True, text=True).stdout
    m = re.search(r"(\d+) parameters, 1 thread\(s\): median AdamW step ([0-9.]+) ms", text)
    return float(m.group(2)) / 1e3 / int(m.group(1))


def comm_table(path):
    if path is None:
        text = subprocess.run(["build/dtrain", "launch", "--nproc-per-node", "2", "--", "build/dtrain", "bench-comm", "-b", "1048576",
                               "-e", "67108864", "-n", "5", "--ops", "all_reduce,all_gather,reduce_scatter"],
                              check=True, capture_output=True, text=True).stdout
        os.makedirs("bench/out", exist_ok=True)
        path = "bench/out/tp_projection_comm.txt"
        with open(path, "w") as f:
            f.write("".join(line.removeprefix("[rank 0] ") + "\n" for line in text.splitlines() if line.startswith("[rank 0] ")))
    return parse_comm_table(path)


class Collectives(BusBandwidth):
    """Time of a collective over RANKS ranks from measured bus bandwidth: size · factor / busbw, with
    nccl-tests' factors (all-reduce 2(n-1)/n, all-gather and reduce-scatter (n-1)/n) and the bus
    bandwidth of the nearest measured size (log-interpolated, held at the ends). Bus bandwidth is
    taken as independent of the rank count, as it is for a ring at the link's speed."""

    def time(self, op, size):
        factor = 2 * (RANKS - 1) / RANKS if op == "all_reduce" else (RANKS - 1) / RANKS
        return size * factor / self.busbw(op, size)


def project(gemm, attention, norm_residual, elementwise, adamw_s, comm, rank_memory_gib):
    psi, psi_replicated = parameters()
    act = SEQ * D * BYTES  # one sequence's activation tensor at the model width
    block = BYTES * (psi - VOCAB * D - D) / LAYERS  # one block's parameters: a ZeRO-3 unit
    embedding = BYTES * VOCAB * D  # the largest ZeRO-3 unit
    rows = []
    for name, t, sp in (("dp 8", 1, False), ("ZeRO-3 over 8", 1, False), ("tp 8", 8, False), ("tp 8 + SP", 8, True)):
        g = gemm[t]
        swiglu, rotary, loss = elementwise[t]
        layer = ("q", "k", "v", "o", "gate", "up", "down")
        forward = LAYERS * sum(g[n][0] for n in layer) + g["head"][0]
        backward = LAYERS * sum(g[n][1] + g[n][2] for n in layer) + g["head"][1] + g["head"][2]
        # Norms and residual adds run on every token under tp, on the rank's sequence shard under SP;
        # a third of each elementwise op's forward-and-backward time is its forward.
        elem = LAYERS * (2 * norm_residual / (t if sp else 1) + swiglu + rotary) + loss
        other = LAYERS * attention[t] + elem
        forward += other / 3
        backward += 2 * other / 3
        micro_batches = GLOBAL_SEQUENCES // (RANKS // t)
        compute = micro_batches * (forward + backward)
        rank_params = psi if name == "dp 8" else (psi - psi_replicated) / RANKS + (psi_replicated if t > 1 else 0)
        optimizer = rank_params * adamw_s
        if name == "dp 8":
            reduce = comm.time("all_reduce", BYTES * psi)
            exposed = max(0.0, reduce - backward) + comm.time("all_reduce", DDP_BUCKET)
            traffic = reduce
        elif name == "ZeRO-3 over 8":
            gather = comm.time("all_gather", BYTES * psi)
            scatter = comm.time("reduce_scatter", BYTES * psi)
            traffic = 2 * gather + scatter
            exposed = max(0.0, gather - forward) + max(0.0, gather + scatter - backward) + comm.time("all_gather", embedding)
        else:
            # Per sub-layer (attention, MLP) and micro-batch, as dtrain's ColumnParallelLinear and
            # RowParallelLinear communicate. tp: the row-parallel output's all-reduce in forward, the
            # input gradient's all-reduce in backward behind the column-parallel weight-gradient
            # GEMMs. SP: forward gathers the input and reduce-scatters the output; backward gathers
            # the output's gradient, gathers the input again behind the input-gradient GEMMs (it is
            # not kept) and reduce-scatters the input gradient behind the weight-gradient GEMMs.
            per_layer_exposed = per_layer_traffic = 0.0
            for column in (("q", "k", "v"), ("gate", "up")):
                dgrad, wgrad = sum(g[n][1] for n in column), sum(g[n][2] for n in column)
                if sp:
                    ag, rs = comm.time("all_gather", act), comm.time("reduce_scatter", act)
                    per_layer_exposed += 2 * ag + rs + max(0.0, ag - dgrad) + max(0.0, rs - wgrad)
                    per_layer_traffic += 3 * ag + 2 * rs
                else:
                    ar = comm.time("all_reduce", act)
                    per_layer_exposed += ar + max(0.0, ar - wgrad)
                    per_layer_traffic += 2 * ar
            # The embedding's all-reduce (reduce-scatter under SP) and the vocab-parallel loss's two
            # all-reduces of one float per token; under SP the norms' gradients once per step.
            edges = comm.time("reduce_scatter" if sp else "all_reduce", act) + 2 * comm.time("all_reduce", SEQ * BYTES)
            norms = comm.time("all_reduce", BYTES * psi_replicated) if sp else 0.0
            exposed = micro_batches * (LAYERS * per_layer_exposed + edges) + norms
            traffic = micro_batches * (LAYERS * per_layer_traffic + edges) + norms
        step = compute + optimizer + exposed
        # Memory per rank: fp32 weights, gradients and AdamW's two moments (16 bytes a parameter),
        # sharded as the layout shards them; activations of one micro-batch as dtrain keeps them
        # (fp32, no dropout, flash attention: no scores): per layer the norms' inputs and outputs
        # (4 tensors of width D, split under SP only) and q, k, v, the attention output and
        # SwiGLU's gate, up, silu(gate) and product (split under tp); the logits and their gradient.
        states = 16 * rank_params
        kv_width = max(1, KV_HEADS // t) * HEAD_DIM
        per_layer = 4 * D / (t if sp else 1) + 2 * D / t + 2 * kv_width + 4 * FF / t
        activations = LAYERS * SEQ * per_layer * BYTES + 2 * SEQ * math.ceil(VOCAB / t) * BYTES
        # ZeRO-3 holds whole units while they are in use: the embedding's, and a block prefetched.
        transient = embedding + block if name == "ZeRO-3 over 8" else 0
        total = states + activations + transient
        rows.append({"layout": name, "compute": compute, "optimizer": optimizer, "traffic": traffic, "exposed": exposed,
                     "step": step, "tokens_per_s": GLOBAL_SEQUENCES * SEQ / step, "states": states,
                     "activations": activations + transient, "total": total, "fits": total <= rank_memory_gib * 2**30})
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--comm", help="a dtrain bench-comm table (rank 0's lines) measured on the target node")
    ap.add_argument("--tokens-measured", type=int, default=512, help="tokens per GEMM measurement, scaled to a sequence")
    ap.add_argument("--reps", type=int, default=2, help="timed calls per measurement")
    ap.add_argument("--rank-memory-gib", type=float, default=32, help="memory one rank may use (a node's / 8)")
    a = ap.parse_args()
    comm_path = os.path.abspath(a.comm) if a.comm else None
    os.chdir(ROOT)  # the build's tools and bench/out are found from the project root
    torch.set_num_threads(1)
    psi, _ = parameters()
    print(f"Llama-1B shape: {psi / 1e9:.3f}B parameters; {RANKS} ranks of one thread; {GLOBAL_SEQUENCES} sequences of {SEQ} per step")
    gemm, attention, elementwise = {}, {}, {}
    for t in (1, 8):
        print(f"measuring at tensor-parallel split {t}...", file=sys.stderr)
        gemm[t] = measure_gemms(t, a.tokens_measured, a.reps)
        attention[t] = measure_attention(t, a.reps)
        elementwise[t] = measure_elementwise(t, a.reps)
    norm_residual = measure_norm_residual(a.reps)
    adamw_s = measure_adamw_per_parameter()
    comm = Collectives(comm_table(comm_path))
    print("\nMeasured per sequence on one rank (seconds; GEMM: output / input gradient / weight gradient, GFLOP/s of the output):")
    print("| split | layer | out x in | output | input grad | weight grad | GFLOP/s |")
    print("|---:|---|---|---:|---:|---:|---:|")
    for t in (1, 8):
        for name, (n, k) in rank_layers(t).items():
            f, dg, wg = gemm[t][name]
            print(f"| {t} | {name} | {n} x {k} | {f:.3f} | {dg:.3f} | {wg:.3f} | {2 * SEQ * n * k / f / 1e9:.1f} |")
    print(f"RMSNorm and residual add over a sequence: {norm_residual:.4f} s")
    for t in (1, 8):
        sw, ro, lo = elementwise[t]
        print(f"split {t}: attention {attention[t]:.3f} s/layer, SwiGLU {sw:.4f} s/layer, RoPE {ro:.4f} s/layer, cross-entropy {lo:.3f} s")
    print(f"AdamW: {adamw_s * 1e9:.2f} ns per parameter")
    for op in ("all_reduce", "all_gather", "reduce_scatter"):
        print(f"{op}: bus bandwidth {comm.busbw(op, SEQ * D * BYTES) / 1e9:.2f} GB/s at one activation ({SEQ * D * BYTES >> 20} MiB), "
              f"{comm.busbw(op, BYTES * psi) / 1e9:.2f} GB/s at the model's size")
    rows = project(gemm, attention, norm_residual, elementwise, adamw_s, comm, a.rank_memory_gib)
    print("\n| layout | compute (s/step) | optimizer (s) | communication (s) | of it exposed (s) | step (s) | tokens/s per node | "
          "model states / rank (GiB) | activations / rank (GiB) | total / rank (GiB) |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['layout']} | {r['compute']:.1f} | {r['optimizer']:.2f} | {r['traffic']:.2f} | {r['exposed']:.2f} | {r['step']:.1f} | "
              f"{r['tokens_per_s']:.0f} | {r['states'] / 2**30:.1f} | {r['activations'] / 2**30:.2f} | {r['total'] / 2**30:.1f} |")
    fitting = [r for r in rows if r["fits"]]
    fastest = min(rows, key=lambda r: r["step"])
    print()
    if not fitting:
        print(f"No layout fits {a.rank_memory_gib:g} GiB per rank.")
        return
    best = min(fitting, key=lambda r: r["step"])
    print(f"Within {a.rank_memory_gib:g} GiB per rank it favours {best['layout']}: {best['step']:.1f} s per step, "
          f"{best['total'] / 2**30:.1f} GiB per rank, {best['exposed']:.2f} s of it waiting on collectives.")
    if fastest is not best:
        print(f"({fastest['layout']} would be faster, {fastest['step']:.1f} s, but needs {fastest['total'] / 2**30:.1f} GiB per rank.)")
    least = min(rows, key=lambda r: r["total"])
    print(f"Least memory per rank: {least['layout']} ({least['total'] / 2**30:.1f} GiB).")
    print("Why: collectives left exposed are " + ", ".join(f"{100 * r['exposed'] / r['step']:.1f}% ({r['layout']})" for r in rows) +
          " of the step, so the step is the rank's compute, which differs by the GEMM shapes and the work each rank repeats: " +
          ", ".join(f"{r['compute']:.0f} s ({r['layout']})" for r in rows) + ".")


if __name__ == "__main__":
    main()
