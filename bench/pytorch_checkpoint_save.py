"""The peers' checkpoints for bench/checkpoint_convert.sh: GPT-2 124M (bench/pytorch_gpt.py's GPT at
12 layers, 12 heads, d 768, 1024 positions, vocabulary 50257, tied) trains one step of AdamW on random
tokens (micro-batch 1, sequence 64, as bench/checkpoint_io.sh trains dtrain's) and saves its model and
optimizer state, sharded, as the framework saves it:
  ds_zero3  DeepSpeed's engine at ZeRO stage 3 (CPU accelerator, Gloo), engine.save_checkpoint(OUT);
  fsdp      FSDP2's fully_shard per block and at the root, torch.distributed.checkpoint.save of
            get_state_dict(model, optimizer) into OUT.
Started rank by rank with torchrun's env variables (bench/peer_settings.sh's run_peer), the framework
in BENCH_FRAMEWORK and OUT in BENCH_CHECKPOINT."""
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pytorch_gpt import GPT  # noqa: E402

LAYERS, HEADS, D, POSITIONS, VOCAB, SEQ = 12, 12, 768, 1024, 50257, 64


def one_step(forward_backward, step, rank):
    tokens = torch.randint(0, VOCAB, (1, SEQ + 1), generator=torch.Generator().manual_seed(rank))
    forward_backward(tokens[:, :-1], tokens[:, 1:])
    step()


def deepspeed_zero3(model, out, rank):
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    os.environ.setdefault("LOCAL_RANK", str(rank))
    import deepspeed

    deepspeed.init_distributed(dist_backend="gloo")
    config = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1,
              "optimizer": {"type": "AdamW", "params": {"lr": 3e-4}}, "zero_optimization": {"stage": 3},
              "steps_per_print": 10**9}
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    one_step(lambda x, y: engine.backward(engine(x, y)), engine.step, rank)
    engine.save_checkpoint(out)


def fsdp(model, out, rank, world):
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard

    dist.init_process_group("gloo", rank=rank, world_size=world)
    mesh = init_device_mesh("cpu", (world,))
    for block in model.blocks:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    one_step(lambda x, y: model(x, y).backward(), optimizer.step, rank)
    model_state, optimizer_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optimizer": optimizer_state}, checkpoint_id=out)


def main():
    framework, out = os.environ["BENCH_FRAMEWORK"], os.environ["BENCH_CHECKPOINT"]
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = GPT(LAYERS, HEADS, D, POSITIONS, VOCAB)
    if framework == "ds_zero3":
        deepspeed_zero3(model, out, rank)
    elif framework == "fsdp":
        fsdp(model, out, rank, world)
    else:
        sys.exit(f"unknown framework '{framework}' (ds_zero3 or fsdp)")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
