"""The PyTorch peer of dtrain's tensor-parallel benchmark: bench/pytorch_gpt.py's GPT, AdamW and
clipping on two ranks over Gloo, split by PyTorch 2.11's DTensor tensor parallelism
(`parallelize_module`), or replicated under DDP for reference. BENCH_LAYOUT picks:

  dp     DistributedDataParallel, each rank its own micro-batch
  tp     ColwiseParallel q, k, v and fc, RowwiseParallel proj and fc_proj (one all-reduce per
         sub-layer in forward and one in backward), the vocabulary split over the ranks in the
         token embedding (RowwiseParallel) and the tied head (ColwiseParallel, logits sharded on the
         vocabulary), and the loss computed on those shards under `loss_parallel`
  tp_sp  the same with sequence parallelism: LayerNorms on sequence shards (SequenceParallel),
         an all-gather before each sub-layer's column-parallel projections and a reduce-scatter
         after its row-parallel one; the embedding is all-reduced, the positions added and the
         sequence split, as Megatron-LM does for learned position embeddings

Under tp both ranks train the same micro-batch, so a step is BENCH_MICRO sequences; under dp each
rank trains its own. BENCH_COMPILE=1 runs the model through torch.compile. After the timed steps,
BENCH_PROFILE_STEPS more steps (at least one) run under torch.profiler, and the share of their wall
time spent in communication (communication_ms says how it is counted for each layout) is reported
as comm_share; peak RSS is taken before profiling.
Started rank by rank with torchrun's env variables (bench/tensor_parallel.sh does it). Prints one
JSON line from rank 0: tokens_per_s (global), step_s, loss, and per rank peak_rss_mib,
comm_share and comm_ms_per_step."""
import contextlib
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor, Replicate, Shard
from torch.distributed.tensor.parallel import (ColwiseParallel, PrepareModuleInput, PrepareModuleOutput, RowwiseParallel,
                                               SequenceParallel, loss_parallel, parallelize_module)

from pytorch_gpt import GPT, peak_rss_mib, report, start_timing


def tensor_parallel(model, mesh, sequence_parallel):
    """Megatron's split of bench/pytorch_gpt.py's GPT over `mesh`, in place."""
    stream = Shard(1) if sequence_parallel else Replicate()  # the residual stream between sub-layers
    plan = {"embed.wte": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate()),
            "head": ColwiseParallel(input_layouts=stream, output_layouts=Shard(-1), use_local_output=False)}
    if sequence_parallel:
        plan["embed"] = PrepareModuleOutput(output_layouts=Replicate(), desired_output_layouts=Shard(1))
        plan["ln_f"] = SequenceParallel()
    for i in range(len(model.blocks)):
        b = f"blocks.{i}"
        plan.update({f"{b}.attn.q": ColwiseParallel(), f"{b}.attn.k": ColwiseParallel(), f"{b}.attn.v": ColwiseParallel(),
                     f"{b}.attn.proj": RowwiseParallel(output_layouts=stream),
                     f"{b}.mlp.fc": ColwiseParallel(), f"{b}.mlp.fc_proj": RowwiseParallel(output_layouts=stream)})
        if sequence_parallel:
            gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
            plan.update({f"{b}.ln1": SequenceParallel(), f"{b}.ln2": SequenceParallel(), f"{b}.attn": gather, f"{b}.mlp": gather})
    parallelize_module(model, mesh, plan)
    # Each style made its own sharded copy of the tied matrix; both split its vocabulary rows.
    model.head.weight = model.embed.wte.weight


def clip_grad_norm(params, max_norm):
    """clip_grad_norm_ over parameters of which some are DTensors (sharded or replicated over tp)
    and some plain tensors, which torch.nn.utils.clip_grad_norm_ cannot take in one list: each
    sharded piece counts once, as does each replicated one."""
    groups = [[p for p in params if isinstance(p, DTensor)], [p for p in params if not isinstance(p, DTensor)]]
    groups = [g for g in groups if g]
    norms = []
    for g in groups:
        n = torch.nn.utils.get_total_norm([p.grad for p in g])
        norms.append(n.full_tensor() if isinstance(n, DTensor) else n)
    total = torch.linalg.vector_norm(torch.stack(norms))
    for g in groups:
        torch.nn.utils.clip_grads_with_norm_(g, max_norm, total)
    return total


def communication_ms(prof, layout):
    """Milliseconds of the profiled window spent in communication. Under tensor parallelism: the
    time this rank's compute thread spent inside DTensor's collectives, from the call to the end
    of its wait (they are waited for before the next layer can run, so none of it is hidden).
    Under DDP: the time Gloo's thread spent in the gradient all-reduces, which DDP starts during
    backward, so much of it runs behind the remaining backward."""
    prefix = "gloo:" if layout == "dp" else "_c10d_functional::"
    return sum(e.cpu_time_total for e in prof.key_averages() if e.key.startswith(prefix)) / 1e3


def main():
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", 1)))
    layers, heads, d, seq, vocab = 6, 6, 384, 256, 256
    micro, steps = int(os.environ.get("BENCH_MICRO", 8)), int(os.environ.get("BENCH_STEPS", 10))
    warmup, profiled = int(os.environ.get("BENCH_WARMUP", 3)), max(1, int(os.environ.get("BENCH_PROFILE_STEPS", 2)))
    layout = os.environ.get("BENCH_LAYOUT", "tp")
    if layout not in ("dp", "tp", "tp_sp"):
        raise SystemExit(f"BENCH_LAYOUT={layout!r}: expected dp, tp or tp_sp")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)  # every rank builds the same full model; tensor parallelism keeps its slices
    model = GPT(layers, heads, d, seq, vocab)
    if layout == "dp":
        model = nn.parallel.DistributedDataParallel(model)
        dp_rank, dp = rank, world
    else:
        tensor_parallel(model, init_device_mesh("cpu", (world,), mesh_dim_names=("tp",)), layout == "tp_sp")
        dp_rank, dp = 0, 1
    params = list(model.parameters())
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    if os.environ.get("BENCH_COMPILE") == "1":
        model = torch.compile(model)
    loss_context = contextlib.nullcontext if layout == "dp" else loss_parallel
    gen = torch.Generator().manual_seed(dp_rank)

    def step():
        tokens = torch.randint(0, vocab, (micro, seq + 1), generator=gen)
        opt.zero_grad(set_to_none=True)
        with loss_context():
            loss = model(tokens[:, :-1], tokens[:, 1:])
            loss.backward()
        clip_grad_norm(params, 1.0)
        opt.step()
        return loss.full_tensor() if isinstance(loss, DTensor) else loss

    for i in range(warmup + steps):
        if i == warmup:
            t0 = start_timing()
        loss = step()
    elapsed = time.perf_counter() - t0
    rss = peak_rss_mib()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        p0 = time.perf_counter()
        for _ in range(profiled):
            step()
        profiled_s = time.perf_counter() - p0
    comm_ms = communication_ms(prof, layout)
    report(rank, world, steps * micro * seq * dp, elapsed, steps, loss, rss_mib=rss,
           comm_share=comm_ms / 1e3 / profiled_s, comm_ms_per_step=comm_ms / profiled)
    # Without it a rank may abort at exit while the other still tears the Gloo pairs down.
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
