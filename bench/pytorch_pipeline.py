"""The PyTorch peer of dtrain's pipeline-parallel benchmark: bench/pytorch_gpt.py's GPT cut into
stages by hand and trained with PyTorch 2.11's torch.distributed.pipelining over Gloo, AdamW and
clipping as dtrain trains it. The model is cut as dtrain cuts it: pp x virtual stages chunks of
consecutive blocks (BENCH_SPLIT: blocks per chunk), the embedding in chunk 0, the final LayerNorm
and the head in the last chunk, chunk c on rank c % pp. BENCH_SCHEDULE picks the schedule:

  gpipe             ScheduleGPipe (one chunk per rank)
  1f1b              Schedule1F1B (one chunk per rank)
  interleaved_1f1b  ScheduleInterleaved1F1B (BENCH_VIRTUAL_STAGES chunks per rank)
  zero_bubble       ScheduleInterleavedZeroBubble with one chunk per rank (ZB-H1's shape; the
                    weight gradients are deferred by the stage's own input/weight backward split)

Tied embeddings: the pipelining API has no notion of a weight two stages share, so the last chunk
holds a copy of the token embedding as its head, and after each step the two copies' gradients are
all-reduced over a group of the first and last stage's ranks (Megatron's embedding group, what dtrain
does). Clipping takes the norm over every stage (the copy counted once). A step is BENCH_MICRO_BATCHES
micro-batches of BENCH_MICRO sequences; the schedule's default gradient scaling averages the
micro-batches' losses, as dtrain does. BENCH_COMPILE=1 runs each chunk through torch.compile (the
zero-bubble schedule refuses compiled stages in 2.11). Started rank by rank with torchrun's env
variables (bench/pipeline_parallel.sh does it). Prints one JSON line from rank 0: tokens_per_s,
step_s, loss (the last stage's, of the last step) and every rank's peak_rss_mib."""
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F
from torch.distributed.pipelining import (PipelineStage, Schedule1F1B, ScheduleGPipe, ScheduleInterleaved1F1B,
                                          ScheduleInterleavedZeroBubble)

from pytorch_gpt import Block, Embeddings, peak_rss_mib, report, start_timing

SCHEDULES = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B, "interleaved_1f1b": ScheduleInterleaved1F1B,
             "zero_bubble": ScheduleInterleavedZeroBubble}
MULTI_STAGE = ("interleaved_1f1b", "zero_bubble")  # these schedules take a list of a rank's stages


class Chunk(nn.Module):
    """Consecutive blocks, with the embedding in front (chunk 0) and the final norm and head behind
    (the last chunk). Built alone, so a rank holds only its own chunks' parameters."""

    def __init__(self, first, last, blocks, layers, heads, d, seq, vocab):
        super().__init__()
        self.embed = Embeddings(vocab, seq, d) if first else None
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(blocks))
        self.ln_f = nn.LayerNorm(d) if last else None
        self.head = nn.Linear(d, vocab, bias=False) if last else None
        for name, p in self.named_parameters():  # GPT-2's initialisation, as bench/pytorch_gpt.py's GPT
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * layers) if name.endswith("proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, x):
        if self.embed is not None:
            x = self.embed(x)
        for b in self.blocks:
            x = b(x)
        if self.head is not None:
            x = self.head(self.ln_f(x))
        return x


def loss_fn(logits, targets):
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def clip_over_stages(params, max_norm, skip):
    """Clipping by the norm over every stage's gradients (`skip`, the head's copy of the tied
    embedding, counted once through the first stage's)."""
    squares = torch.zeros((), dtype=torch.float64)
    for p in params:
        if p.grad is not None and p is not skip:
            squares += p.grad.double().pow(2).sum()
    dist.all_reduce(squares)
    total = squares.sqrt().item()
    coef = max_norm / (total + 1e-6)
    if coef < 1:
        for p in params:
            if p.grad is not None:
                p.grad.mul_(coef)
    return total


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", 1)))
    layers, heads, d, seq, vocab = int(os.environ.get("BENCH_LAYERS", 8)), 6, 384, 256, 256
    micro, m = int(os.environ.get("BENCH_MICRO", 2)), int(os.environ.get("BENCH_MICRO_BATCHES", 8))
    steps, warmup = int(os.environ.get("BENCH_STEPS", 4)), int(os.environ.get("BENCH_WARMUP", 2))
    name = os.environ.get("BENCH_SCHEDULE", "1f1b")
    if name not in SCHEDULES:
        raise SystemExit(f"BENCH_SCHEDULE={name!r}: expected one of {', '.join(SCHEDULES)}")
    v = int(os.environ.get("BENCH_VIRTUAL_STAGES", 2 if name == "interleaved_1f1b" else 1))
    chunks = world * v
    split = [int(x) for x in os.environ["BENCH_SPLIT"].split(",")] if os.environ.get("BENCH_SPLIT") else \
        [layers // chunks + (c < layers % chunks) for c in range(chunks)]
    if len(split) != chunks or sum(split) != layers or min(split) < 1:
        raise SystemExit(f"BENCH_SPLIT={split}: expected {chunks} chunks of at least one block summing to {layers}")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    # Every rank takes part in creating the group, whether it belongs to it or not.
    embedding_group = dist.new_group([0, world - 1]) if world > 1 else None
    torch.manual_seed(1000 + rank)
    mine = [c for c in range(chunks) if c % world == rank]
    modules = {c: Chunk(c == 0, c == chunks - 1, split[c], layers, heads, d, seq, vocab) for c in mine}
    tied = [modules[c].embed.wte.weight if c == 0 else modules[c].head.weight for c in mine if c in (0, chunks - 1)]
    if len(tied) == 2:  # both ends on this rank (pp 1): one weight
        modules[chunks - 1].head.weight = modules[0].embed.wte.weight
        tied = []
    elif tied:  # the two copies start equal: the head's from the first stage's
        dist.broadcast(tied[0].data, src=0, group=embedding_group)
    head_copy = modules[chunks - 1].head.weight if chunks - 1 in modules and 0 not in modules else None
    params = [p for mod in modules.values() for p in mod.parameters()]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    compiled = os.environ.get("BENCH_COMPILE") == "1"
    stages = []
    for c, mod in modules.items():
        stages.append(PipelineStage(torch.compile(mod) if compiled else mod, c, chunks, torch.device("cpu")))
    schedule = SCHEDULES[name](stages if name in MULTI_STAGE else stages[0], n_microbatches=m, loss_fn=loss_fn)
    gen = torch.Generator().manual_seed(0)  # every rank draws the same batch; the ends use theirs

    def step():
        tokens = torch.randint(0, vocab, (m * micro, seq + 1), generator=gen)
        opt.zero_grad(set_to_none=True)
        losses = []
        args = (tokens[:, :-1].contiguous(),) if 0 in modules else ()
        kwargs = {"target": tokens[:, 1:].contiguous(), "losses": losses} if chunks - 1 in modules else {}
        schedule.step(*args, **kwargs)
        if tied:
            dist.all_reduce(tied[0].grad, group=embedding_group)
        clip_over_stages(params, 1.0, head_copy)
        opt.step()
        return torch.stack(losses).mean() if losses else torch.zeros(())

    for i in range(warmup + steps):
        if i == warmup:
            dist.barrier()
            t0 = start_timing()
        loss = step()
    dist.barrier()
    elapsed = time.perf_counter() - t0
    # The loss lives on the last stage; rank 0 reports it.
    dist.all_reduce(loss)
    report(rank, world, steps * m * micro * seq, elapsed, steps, loss, rss_mib=peak_rss_mib())
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
