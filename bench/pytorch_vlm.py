"""The PyTorch peer of dtrain's vision-language benchmark (bench/vlm_plans.sh): preset vlm-ocr's model
in plain PyTorch, shaped and built as dtrain builds it. A ViT (patch embedding over 8x8x3 patches
with a bias, learned row and column position tables of max_grid rows, pre-norm blocks with
LayerNorm, biases, separate q, k and v projections and a GELU-tanh MLP, bidirectional attention
within each image, a final LayerNorm, the 2x2 merge of neighbouring patches into one token), a
two-layer GELU-tanh connector to the LLM's width, and a Llama LLM (RMSNorm, rotate-half RoPE,
SwiGLU, grouped-query attention through F.scaled_dot_product_attention, no biases, the head tied
to the embedding) whose image placeholders take the image tokens in order; the loss is the mean
over the text's targets only (the image positions and the padding are ignored). AdamW (weight
decay on matrices), clipping at 1.0, fp32, Gloo.

The data are the benchmark's shapes, synthesized: every sample one image of BENCH_IMAGE_H x
BENCH_IMAGE_W patches and BENCH_TEXT text tokens, laid out in a row as dtrain lays one out
([image placeholders][text][end], padded with the end token); the pixels are random normals (what
dtrain's per-image standardization leaves: mean 0, deviation 1) and the text random bytes, not the
PNGs and texts dtrain reads.

BENCH_PLAN picks the parallelism: plan (the vision encoder frozen, the connector replicated by DDP,
the LLM fully sharded by FSDP2: fully_shard per block and on the LLM), fsdp_full (nothing frozen;
fully_shard per block of both, on the connector and at the root) or ddp (nothing frozen, DDP around
the whole model). BENCH_COMPILE=1 compiles each transformer block (vision and LLM) with
torch.compile. Started rank by rank with torchrun's env variables (bench/peer_settings.sh's
run_peer). Prints one JSON line from rank 0: tokens_per_s (global, every position of every row, as
dtrain counts them), step_s, loss, and every rank's peak RSS in MiB."""
import math
import os
import time

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.nn.functional as F

from pytorch_gpt import report, start_timing

# preset vlm-ocr (src/model/transformer_config.cpp, src/model/vision_config.h) at the benchmark's seq_len.
VISION = dict(layers=4, heads=4, d=128, ff=512, patch=8, channels=3, max_grid=32, merge=2)
LLM = dict(layers=4, heads=6, kv_heads=2, d=192, ff=512, vocab=264, rope_theta=10000.0)
IMAGE_TOKEN, END_TOKEN, IGNORED = 256, 257, -1


class VisionBlock(nn.Module):
    """GPT-2's block without its positions: LayerNorm, biases, GELU-tanh; attention over the patches
    of one image (x is [images, patches, d]), not causal."""

    def __init__(self, d, heads, ff):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d)
        self.q_proj, self.k_proj, self.v_proj, self.o_proj = (nn.Linear(d, d) for _ in range(4))
        self.ln2 = nn.LayerNorm(d)
        self.up_proj = nn.Linear(d, ff)
        self.down_proj = nn.Linear(ff, d)

    def forward(self, x):
        B, T, d = x.shape
        h = self.ln1(x)
        q, k, v = (p(h).view(B, T, self.heads, -1).transpose(1, 2) for p in (self.q_proj, self.k_proj, self.v_proj))
        x = x + self.o_proj(F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(B, T, d))
        return x + self.down_proj(F.gelu(self.up_proj(self.ln2(x)), approximate="tanh"))


class VisionEncoder(nn.Module):
    def __init__(self, layers, heads, d, ff, patch, channels, max_grid, merge):
        super().__init__()
        self.merge = merge
        self.patch_embed = nn.Linear(channels * patch * patch, d)
        self.row_embed = nn.Embedding(max_grid, d)
        self.col_embed = nn.Embedding(max_grid, d)
        self.blocks = nn.ModuleList(VisionBlock(d, heads, ff) for _ in range(layers))
        self.ln_post = nn.LayerNorm(d)

    def forward(self, patches):
        """patches [images, gh, gw, values] -> image tokens [images·gh·gw/merge², d·merge²], each
        image's in row-major order of its 2x2 groups."""
        n, gh, gw, _ = patches.shape
        rows, cols = torch.arange(gh), torch.arange(gw)
        positions = self.row_embed(rows)[:, None, :] + self.col_embed(cols)[None, :, :]  # [gh, gw, d]
        x = (self.patch_embed(patches) + positions).reshape(n, gh * gw, -1)
        for b in self.blocks:
            x = b(x)
        x = self.ln_post(x)
        m, d = self.merge, x.shape[-1]
        x = x.view(n, gh // m, m, gw // m, m, d).permute(0, 1, 3, 2, 4, 5)  # group row, group col, row in group, col in group
        return x.reshape(n * (gh // m) * (gw // m), m * m * d)


class Connector(nn.Module):
    def __init__(self, d_in, d_out):
        super().__init__()
        self.fc1 = nn.Linear(d_in, d_out)
        self.fc2 = nn.Linear(d_out, d_out)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x), approximate="tanh"))


def rotate_half(x, cos, sin):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class LlamaBlock(nn.Module):
    def __init__(self, d, heads, kv_heads, ff):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, d // heads
        self.ln1 = nn.RMSNorm(d, eps=1e-5)
        self.q_proj = nn.Linear(d, heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(d, kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(heads * self.head_dim, d, bias=False)
        self.ln2 = nn.RMSNorm(d, eps=1e-5)
        self.gate_proj = nn.Linear(d, ff, bias=False)
        self.up_proj = nn.Linear(d, ff, bias=False)
        self.down_proj = nn.Linear(ff, d, bias=False)

    def forward(self, x, cos, sin):
        B, T, d = x.shape
        h = self.ln1(x)
        q = self.q_proj(h).view(B, T, self.heads, -1).transpose(1, 2)
        k = self.k_proj(h).view(B, T, self.kv_heads, -1).transpose(1, 2)
        v = self.v_proj(h).view(B, T, self.kv_heads, -1).transpose(1, 2)
        q, k = rotate_half(q, cos, sin), rotate_half(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=self.kv_heads != self.heads)
        x = x + self.o_proj(y.transpose(1, 2).reshape(B, T, d))
        h = self.ln2(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Llama(nn.Module):
    def __init__(self, layers, heads, kv_heads, d, ff, vocab, rope_theta):
        super().__init__()
        self.wte = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(LlamaBlock(d, heads, kv_heads, ff) for _ in range(layers))
        self.ln_f = nn.RMSNorm(d, eps=1e-5)
        half = d // heads // 2
        self.inv_freq = rope_theta ** (-torch.arange(0, half, dtype=torch.float64) / half)

    def forward(self, tokens, image_tokens, targets):
        x = self.wte(tokens).masked_scatter((tokens == IMAGE_TOKEN).unsqueeze(-1), image_tokens)
        angles = torch.outer(torch.arange(tokens.shape[1], dtype=torch.float64), self.inv_freq)
        cos, sin = angles.cos().float(), angles.sin().float()
        for b in self.blocks:
            x = b(x, cos, sin)
        logits = F.linear(self.ln_f(x), self.wte.weight)  # the head tied to the embedding
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORED)


class VLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.vision = VisionEncoder(**VISION)
        self.connector = Connector(VISION["d"] * VISION["merge"] ** 2, LLM["d"])
        self.llm = Llama(**LLM)
        for name, p in self.named_parameters():  # as src/model/parameter_init.cpp
            if p.dim() < 2:
                nn.init.constant_(p, 0.0 if name.endswith(".bias") else 1.0)
            else:
                layers = VISION["layers"] if name.startswith("vision.") else LLM["layers"]
                residual = name.endswith(("o_proj.weight", "down_proj.weight"))
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * layers) if residual else 0.02)

    def forward(self, patches, tokens, targets):
        return self.llm(tokens, self.connector(self.vision(patches)), targets)


def batch(gen, micro, seq, grid_h, grid_w, text):
    """One micro-batch of the benchmark's rows: patches [micro, gh, gw, values], tokens and targets [micro, seq]."""
    v = VISION
    patches = torch.randn(micro, grid_h, grid_w, v["channels"] * v["patch"] ** 2, generator=gen)
    image = grid_h * grid_w // v["merge"] ** 2
    end = image + text  # the end token's position
    row = torch.full((micro, seq + 1), END_TOKEN)
    row[:, :image] = IMAGE_TOKEN
    row[:, image:end] = torch.randint(0, 256, (micro, text), generator=gen)
    targets = row[:, 1:].clone()
    positions = torch.arange(seq)
    targets[:, (positions + 1 < image) | (positions + 1 > end)] = IGNORED  # text and its end token only
    return patches, row[:, :-1], targets


def parallelize(model, plan, world):
    """The model under BENCH_PLAN (the module docstring says each)."""
    if plan == "plan":
        model.vision.requires_grad_(False)
    if world == 1:
        return model
    if plan == "ddp":
        return nn.parallel.DistributedDataParallel(model)
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import fully_shard
    mesh = init_device_mesh("cpu", (world,))
    for b in model.llm.blocks:
        fully_shard(b, mesh=mesh)
    if plan == "plan":
        fully_shard(model.llm, mesh=mesh)
        model.connector = nn.parallel.DistributedDataParallel(model.connector)
        return model
    for b in model.vision.blocks:
        fully_shard(b, mesh=mesh)
    fully_shard(model.connector, mesh=mesh)
    return fully_shard(model, mesh=mesh)


def clip_gradients(params, max_norm):
    """clip_grad_norm_ over sharded (DTensor) and whole gradients together: the plan holds both."""
    from torch.distributed.tensor import DTensor
    grads = [p.grad for p in params if p.grad is not None]
    sharded = [g for g in grads if isinstance(g, DTensor)]
    whole = [g for g in grads if not isinstance(g, DTensor)]
    squares = torch.zeros(())
    if sharded:
        squares = squares + torch.nn.utils.get_total_norm(sharded).full_tensor() ** 2
    if whole:
        squares = squares + torch.nn.utils.get_total_norm(whole) ** 2
    total = squares.sqrt()
    for group in (sharded, whole):
        if group:
            torch.nn.utils.clip_grads_with_norm_(group, max_norm, total)


def param_groups(model):
    """Decay on matrices; sharded and whole parameters in separate groups, since one foreach update
    does not take both."""
    from torch.distributed.tensor import DTensor
    groups = {}
    for p in model.parameters():
        if p.requires_grad:
            groups.setdefault((p.dim() >= 2, isinstance(p, DTensor)), []).append(p)
    return [{"params": ps, "weight_decay": 0.05 if decay else 0.0} for (decay, _), ps in groups.items()]


def main():
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    torch.set_num_threads(int(os.environ.get("BENCH_THREADS", 1)))
    micro, seq = int(os.environ.get("BENCH_MICRO", 16)), int(os.environ.get("BENCH_SEQ", 80))
    grid_h, grid_w = int(os.environ.get("BENCH_IMAGE_H", 4)), int(os.environ.get("BENCH_IMAGE_W", 32))
    text = int(os.environ.get("BENCH_TEXT", 40))
    steps, warmup = int(os.environ.get("BENCH_STEPS", 10)), int(os.environ.get("BENCH_WARMUP", 3))
    plan = os.environ.get("BENCH_PLAN", "plan")
    if world > 1:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = parallelize(VLM(), plan, world)
    if os.environ.get("BENCH_COMPILE") == "1":
        inner = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
        for b in [*inner.vision.blocks, *inner.llm.blocks]:
            b.compile()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(param_groups(model), lr=3e-3, betas=(0.9, 0.95), eps=1e-8)
    gen = torch.Generator().manual_seed(rank)
    for step in range(warmup + steps):
        if step == warmup:
            t0 = start_timing()
        patches, tokens, targets = batch(gen, micro, seq, grid_h, grid_w, text)
        loss = model(patches, tokens, targets)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(params, 1.0)
        opt.step()
    report(rank, world, steps * micro * seq * world, time.perf_counter() - t0, steps, loss)
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
