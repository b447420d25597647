"""The PyTorch peer of dtrain's context-parallel benchmark: a Llama-shaped model as bench/llama_bench.json
has it (RMSNorm, RoPE, SwiGLU, grouped-query attention through F.scaled_dot_product_attention with
enable_gqa, no biases, tied embeddings; 6 layers, 6 heads, 2 kv heads, d 384, SwiGLU width 1024,
vocabulary 256), fp32, micro-batch 1, AdamW and clipping as dtrain's bench runs have them.
BENCH_MODE picks:

  cp    two ranks over Gloo under PyTorch 2.11's torch.distributed.tensor.experimental.context_parallel
        (ring attention over SDPA; the inputs, targets and RoPE tables sharded on the sequence with its
        default head-tail load balancing), gradients averaged by DDP. BENCH_CP_ROUTE forces an SDPA
        backend inside it: "default" (none: the CPU picks its fused flash kernel), "math" or
        "efficient". Where a step fails, each rank prints {"error": ...} with the exception's type and
        message (stderr has the traceback) and the script exits 0: the failure is the result.
  full  one rank, whole-sequence attention (the CPU's fused flash kernel): the step context parallelism
        splits, for comparison.

BENCH_SEQ (4096), BENCH_THREADS, BENCH_STEPS, BENCH_WARMUP; BENCH_COMPILE=1 runs the model through
torch.compile. Started rank by rank with torchrun's env variables (bench/context_parallel.sh does it).
Prints one JSON line from rank 0: tokens_per_s, step_s, loss and every rank's peak_rss_mib."""
import json
import math
import os
import sys
import time
import traceback

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from pytorch_gpt import report

LAYERS, HEADS, KV_HEADS, D, FF, VOCAB = 6, 6, 2, 384, 1024, 256


class RMSNorm(nn.Module):
    def __init__(self, d, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq, head_dim, theta=10000.0):
    """cos and sin [seq, head_dim / 2]: buffers context_parallel shards with the sequence."""
    inv = 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    angles = torch.outer(torch.arange(seq, dtype=torch.float32), inv)
    return angles.cos(), angles.sin()


def rotate(x, cos, sin):
    """RoPE on [B, heads, T, head_dim], the halves rotated as Llama's reference code pairs them."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.head_dim = D // HEADS
        self.q = nn.Linear(D, D, bias=False)
        self.k = nn.Linear(D, KV_HEADS * self.head_dim, bias=False)
        self.v = nn.Linear(D, KV_HEADS * self.head_dim, bias=False)
        self.o = nn.Linear(D, D, bias=False)

    def forward(self, x, cos, sin):
        B, T, _ = x.shape
        q, k, v = (f(x).view(B, T, -1, self.head_dim).transpose(1, 2) for f in (self.q, self.k, self.v))
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return self.o(y.transpose(1, 2).reshape(B, T, D))


class SwiGLU(nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = nn.Linear(D, FF, bias=False)
        self.up = nn.Linear(D, FF, bias=False)
        self.down = nn.Linear(FF, D, bias=False)

    def forward(self, x):
        return self.down(F.silu(self.gate(x)) * self.up(x))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.attn, self.norm2, self.mlp = RMSNorm(D), Attention(), RMSNorm(D), SwiGLU()

    def forward(self, x, cos, sin):
        x = x + self.attn(self.norm1(x), cos, sin)
        return x + self.mlp(self.norm2(x))


class Llama(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = RMSNorm(D)
        self.head = nn.Linear(D, VOCAB, bias=False)
        self.head.weight = self.embed.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * LAYERS) if name.endswith(("o.weight", "down.weight")) else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets, cos, sin):
        x = self.embed(idx)
        for b in self.blocks:
            x = b(x, cos, sin)
        logits = self.head(self.norm(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def sdpa_route(name):
    """The SDPA backend BENCH_CP_ROUTE forces, as a context manager."""
    import contextlib

    from torch.nn.attention import SDPBackend, sdpa_kernel
    routes = {"default": None, "math": SDPBackend.MATH, "efficient": SDPBackend.EFFICIENT_ATTENTION}
    if name not in routes:
        raise SystemExit(f"BENCH_CP_ROUTE={name!r}: expected one of {', '.join(routes)}")
    return contextlib.nullcontext() if routes[name] is None else sdpa_kernel(routes[name])


def main():
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", 1)))
    seq, steps = int(os.environ.get("BENCH_SEQ", 4096)), int(os.environ.get("BENCH_STEPS", 5))
    warmup = int(os.environ.get("BENCH_WARMUP", 2))
    mode = os.environ.get("BENCH_MODE", "full")
    if mode not in ("cp", "full"):
        raise SystemExit(f"BENCH_MODE={mode!r}: expected cp or full")
    torch.manual_seed(0)
    model = Llama()
    mesh = None
    if mode == "cp":
        from torch.distributed.device_mesh import init_device_mesh
        dist.init_process_group("gloo", rank=rank, world_size=world)
        mesh = init_device_mesh("cpu", (world,), mesh_dim_names=("cp",))
        model = nn.parallel.DistributedDataParallel(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if os.environ.get("BENCH_COMPILE") == "1":
        model = torch.compile(model)
    gen = torch.Generator().manual_seed(0)  # every cp rank draws the same sequence and keeps its shard

    def step():
        tokens = torch.randint(0, VOCAB, (1, seq + 1), generator=gen)
        inputs, targets = tokens[:, :-1].contiguous(), tokens[:, 1:].contiguous()
        cos, sin = rope_tables(seq, D // HEADS)
        opt.zero_grad(set_to_none=True)
        if mesh is None:
            loss = model(inputs, targets, cos, sin)
            loss.backward()
        else:
            from torch.distributed.tensor.experimental import context_parallel
            with sdpa_route(os.environ.get("BENCH_CP_ROUTE", "default")), \
                    context_parallel(mesh, buffers=[inputs, targets, cos, sin], buffer_seq_dims=[1, 1, 0, 0],
                                     no_restore_buffers={inputs, targets, cos, sin}):
                loss = model(inputs, targets, cos, sin)
                loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss

    try:
        for i in range(warmup + steps):
            if i == warmup:
                t0 = time.perf_counter()
            loss = step()
    except Exception as e:  # the result where context_parallel does not run: the error it gives
        traceback.print_exc()
        print(json.dumps({"rank": rank, "error": f"{type(e).__name__}: {e}"}), flush=True)
        if mesh is not None:
            dist.destroy_process_group()
        return
    elapsed = time.perf_counter() - t0
    tokens_per_step = seq  # under cp both ranks train the same sequence
    report(rank, world, steps * tokens_per_step, elapsed, steps, loss)
    if mesh is not None:
        dist.destroy_process_group()


if __name__ == "__main__":
    sys.exit(main())
