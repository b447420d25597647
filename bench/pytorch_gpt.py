"""The PyTorch peer of dtrain's training benchmark: the same GPT (pre-LayerNorm, separate q, k and v
projections as dtrain's model has them, causal F.scaled_dot_product_attention as nanoGPT writes it,
GELU-tanh, learned positions, tied embeddings, GPT-2 init), AdamW, DDP over Gloo; fp32, or BENCH_PRECISION=bf16 for torch.autocast("cpu",
dtype=torch.bfloat16) over forward and loss; BENCH_AC=full (torch.utils.checkpoint around each block)
or selective (around the attention core alone); BENCH_ATTENTION=manual writes the attention core out (q·kᵀ,
causal mask, softmax in fp32, ·v) in place of F.scaled_dot_product_attention; BENCH_COMPILE=1 runs the
model (inside DDP) through torch.compile; BENCH_SHARDING=zero1 (DDP with ZeroRedundancyOptimizer),
fsdp_grad_op (FSDP2 fully_shard per block and at the root with reshard_after_forward=False: ZeRO-2's
sharding) or fsdp_full (fully_shard: ZeRO-3) instead of DDP, or ds_zero1, ds_zero2, ds_zero3 (DeepSpeed's
engine at that ZeRO stage, on its CPU accelerator over Gloo, with the same AdamW and clipping). BENCH_DEVICE=cuda
trains on the GPU (DDP over NCCL; autocast on CUDA; BENCH_FUSED_ADAMW=1 takes the fused AdamW kernel);
BENCH_SHAPE=layers,heads,d_model,seq_len replaces the bench model's 6,6,384,256. Started rank by rank with torchrun's env variables
(bench/train.sh does it). Prints one JSON line from rank 0: tokens_per_s (global), step_s, and every
rank's peak RSS in MiB."""
import json
import math
import os
import resource
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
import torch.utils.checkpoint as checkpoint

AC = os.environ.get("BENCH_AC", "none")
MANUAL_ATTENTION = os.environ.get("BENCH_ATTENTION", "sdpa") == "manual"


def attention_core(q, k, v):
    if not MANUAL_ATTENTION:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T = q.shape[-2]
    scores = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(q.shape[-1]))
    causal = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    weights = scores.float().masked_fill(~causal, float("-inf")).softmax(-1)
    return weights.to(v.dtype) @ v


class Attention(nn.Module):
    """Heads are counted from the projections' width, so a tensor-parallel rank, whose q, k and v
    are a slice of the columns, runs its own heads (bench/pytorch_tensor_parallel.py)."""

    def __init__(self, d, heads):
        super().__init__()
        self.head_dim = d // heads
        self.q = nn.Linear(d, d)
        self.k = nn.Linear(d, d)
        self.v = nn.Linear(d, d)
        self.proj = nn.Linear(d, d)

    def forward(self, x):
        B, T, _ = x.shape
        q, k, v = (f(x).view(B, T, -1, self.head_dim).transpose(1, 2) for f in (self.q, self.k, self.v))
        if AC == "selective":
            y = checkpoint.checkpoint(attention_core, q, k, v, use_reentrant=False)
        else:
            y = attention_core(q, k, v)
        return self.proj(y.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.fc = nn.Linear(d, 4 * d)
        self.fc_proj = nn.Linear(4 * d, d)

    def forward(self, x):
        return self.fc_proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = MLP(d)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class Embeddings(nn.Module):
    """Token and learned position embeddings, summed."""

    def __init__(self, vocab, seq, d):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.wpe = nn.Embedding(seq, d)

    def forward(self, idx):
        return self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))


class GPT(nn.Module):
    def __init__(self, layers, heads, d, seq, vocab):
        super().__init__()
        self.embed = Embeddings(vocab, seq, d)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.head.weight = self.embed.wte.weight  # tied
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.embed(idx)
        for b in self.blocks:
            x = checkpoint.checkpoint(b, x, use_reentrant=False) if AC == "full" else b(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def start_timing():
    """The timed steps begin: with BENCH_SAY_TIMING set, said on stderr (bench/zero_profile.sh waits for it)."""
    if os.environ.get("BENCH_SAY_TIMING"):
        print("timing from here", file=sys.stderr, flush=True)
    return time.perf_counter()


def synchronize(device):
    """The GPU's queued work ends before a clock is read."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def report(rank, world, tokens, elapsed, steps, loss, rss_mib=None, **extra):
    """Rank 0 prints the JSON line; rss_mib is this rank's peak if taken earlier than now, and extra
    holds more fields, each gathered from every rank into a list."""
    mine = {"peak_rss_mib": peak_rss_mib() if rss_mib is None else rss_mib, **extra}
    ranks = [None] * world
    if world > 1:
        dist.all_gather_object(ranks, mine)
    else:
        ranks = [mine]
    if rank == 0:
        line = {"tokens_per_s": tokens / elapsed, "step_s": elapsed / steps, "loss": loss.item()}
        line.update({key: [r[key] for r in ranks] for key in mine})
        print(json.dumps(line))


def train_deepspeed(model, stage, rank, world, micro, steps, warmup, seq, vocab):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("LOCAL_RANK", str(rank))
    import deepspeed

    deepspeed.init_distributed(dist_backend="gloo")
    config = {"train_micro_batch_size_per_gpu": micro, "gradient_accumulation_steps": 1, "gradient_clipping": 1.0,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-4, "betas": [0.9, 0.95], "eps": 1e-8}},
              "zero_optimization": {"stage": stage}, "steps_per_print": 10**9}
    groups = [{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}]
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=groups, config=config)
    gen = torch.Generator().manual_seed(rank)
    for step in range(warmup + steps):
        if step == warmup:
            t0 = start_timing()
        tokens = torch.randint(0, vocab, (micro, seq + 1), generator=gen)
        loss = engine(tokens[:, :-1], tokens[:, 1:])
        engine.backward(loss)
        engine.step()
    report(rank, world, steps * micro * seq * world, time.perf_counter() - t0, steps, loss)
    dist.destroy_process_group()


def main():
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", 1)))
    layers, heads, d, seq = (int(v) for v in os.environ.get("BENCH_SHAPE", "6,6,384,256").split(","))
    vocab = 256
    device = torch.device(os.environ.get("BENCH_DEVICE", "cpu"))
    if device.type == "cuda":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)))
    micro, steps = int(os.environ.get("BENCH_MICRO", 8)), int(os.environ.get("BENCH_STEPS", 20))
    warmup = int(os.environ.get("BENCH_WARMUP", 3))
    bf16 = os.environ.get("BENCH_PRECISION", "fp32") == "bf16"
    torch.manual_seed(0)
    model = GPT(layers, heads, d, seq, vocab).to(device)
    sharding = os.environ.get("BENCH_SHARDING", "ddp")
    if sharding.startswith("ds_zero"):
        return train_deepspeed(model, int(sharding[-1]), rank, world, micro, steps, warmup, seq, vocab)
    if world > 1:
        dist.init_process_group("nccl" if device.type == "cuda" else "gloo", rank=rank, world_size=world)
        if sharding.startswith("fsdp"):
            from torch.distributed.device_mesh import init_device_mesh
            from torch.distributed.fsdp import fully_shard
            mesh = init_device_mesh(device.type, (world,))
            reshard = sharding == "fsdp_full"
            for b in model.blocks:
                fully_shard(b, mesh=mesh, reshard_after_forward=reshard)
            fully_shard(model, mesh=mesh, reshard_after_forward=reshard)
        else:
            model = nn.parallel.DistributedDataParallel(model)
    if os.environ.get("BENCH_COMPILE") == "1":
        model = torch.compile(model)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    if sharding == "zero1" and world > 1:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(groups, optimizer_class=torch.optim.AdamW, lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    else:
        fused = os.environ.get("BENCH_FUSED_ADAMW") == "1" or None
        opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8, fused=fused)
    gen = torch.Generator().manual_seed(rank)
    for step in range(warmup + steps):
        if step == warmup:
            synchronize(device)
            t0 = start_timing()
        tokens = torch.randint(0, vocab, (micro, seq + 1), generator=gen).to(device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(tokens[:, :-1], tokens[:, 1:])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
    synchronize(device)
    report(rank, world, steps * micro * seq * world, time.perf_counter() - t0, steps, loss)
    if world > 1:
        # Without it a rank may abort at exit ("terminate called without an active exception") while
        # the other still tears the Gloo pairs down.
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
