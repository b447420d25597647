// The feature matrix: every way of spreading a job over ranks must train like one rank with the
// whole batch. Each row is a job (config overrides, a number of ranks) run through the CLI and
// compared against its reference (equivalence.h): a one-rank job, run once per test and shared by
// every row that names it, or another row, for what must match it bit for bit. A parallelism joins
// the matrix with one line of kRows.
#include <gtest/gtest.h>

#include <map>

#include "equivalence.h"
#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

// What every run of the matrix shares, on top of kBase: a global batch of 12, which 1 to 4 ranks
// divide, taken whole by a one-rank reference; validation at steps 2 and 4, compared like the
// training loss; a frozen tensor, which no rank may update or reduce.
const Sets kMatrixJob = {"train_batch_size=12", "train_micro_batch_size_per_gpu=12", "train.eval_every=2",
                         "train.freeze=[\"blocks.0.ln1.*\"]"};

// The one-rank references, by name; each row's test runs its reference once.
// The fp32 GPT-2 and Llama jobs are references three times over, for the data-parallel, the
// tensor-parallel and the context-parallel rows, so that each test stays short on a slow machine.
const Sets kMatrixGpt2 = {"model.arch=gpt2", "model.n_head=2"};
const Sets kMatrixLlama = {"model.arch=llama", "model.n_head=4", "model.n_kv_head=2"};
const std::map<std::string, Sets> kReferences = {
    {"gpt2", kMatrixGpt2},
    {"gpt2_tp", kMatrixGpt2},
    {"gpt2_cp", kMatrixGpt2},
    {"llama", kMatrixLlama},
    {"llama_tp", kMatrixLlama},
    {"llama_cp", kMatrixLlama},
    {"gpt2_bf16", {"model.arch=gpt2", "bf16.enabled=true"}},
    {"gpt2_fp16", {"model.arch=gpt2", "fp16.enabled=true"}},
    // Pipeline rows, their rows apart so that each test stays short: 8 blocks cut into up to 8
    // chunks, with the embedding tied to the head across the first and the last stage.
    {"gpt2_pp", {"model.arch=gpt2", "model.n_layer=8"}},
    {"gpt2_pp_3d", {"model.arch=gpt2", "model.n_layer=4"}},
    // Its reference accumulates 4 micro-batches of 3, as its pipelines run them: over 8 Llama blocks
    // one batch of 12 against four of 3 alone reaches the fp32 bound of the gradient norm.
    {"llama_pp", {"model.arch=llama", "model.n_head=4", "model.n_kv_head=2", "model.n_layer=8", "model.tie_embeddings=false",
                  "train_micro_batch_size_per_gpu=3"}},
    {"gpt2_bf16_pp", {"model.arch=gpt2", "model.n_layer=4", "bf16.enabled=true"}},
    // The per-module plan's rows apart, the fp32 GPT-2 job a fourth time and bf16's a second.
    {"gpt2_modules", kMatrixGpt2},
    {"gpt2_bf16_modules", {"model.arch=gpt2", "bf16.enabled=true"}},
};

// Layouts used by several rows: micro-batches per rank that keep the batch of 12.
const Sets k2Ranks = {"train_micro_batch_size_per_gpu=6"};
const Sets k2RanksAccumulating = {"train_micro_batch_size_per_gpu=3"};  // accumulation 2
const Sets k4Ranks = {"train_micro_batch_size_per_gpu=3"};
// 3 ranks pad every bucket, micro-batch 2 accumulates twice, and small buckets make several.
const Sets k3RanksBuckets = {"train_micro_batch_size_per_gpu=2", "zero_optimization.reduce_bucket_size=5000"};
// Hybrid sharding on 4 ranks as 2 x 2: shards within each pair, the pairs average their shards.
const Sets kHybrid = {"train_micro_batch_size_per_gpu=1", "zero_optimization.reduce_bucket_size=5000",
                      "parallel.fsdp.sharding_strategy=hybrid_shard", "parallel.fsdp.shard_group_size=2"};
const Sets kBf16Accumulating = {"train_micro_batch_size_per_gpu=3", "data_types.grad_accum_dtype=bf16"};
// Pipelines: micro-batches of 3, so 4 per step on one pipeline and 2 on each of two.
const Sets kPp2 = {"parallel.pp=2", "train_micro_batch_size_per_gpu=3"};
const Sets kPp4 = {"parallel.pp=4", "train_micro_batch_size_per_gpu=3"};
Sets schedule(const std::string& name, int virtual_stages = 1) {
  return {"parallel.pipeline.schedule=" + name, "parallel.pipeline.virtual_stages=" + std::to_string(virtual_stages)};
}
// Context parallelism: ring attention on the zigzag layout (16 tokens in 4 or 8 chunks), or Ulysses.
const Sets kCp2 = {"parallel.cp=2"};
const Sets kCp4 = {"parallel.cp=4"};
const Sets kUlysses = {"parallel.context.impl=\"ulysses\""};
// parallel.modules keeping the second block and the final norm whole on every rank (all-reduced,
// never gathered, their state whole) while ZeRO shards the rest; a pipeline of 4 blocks holds one
// on each stage.
const std::string kKeepWhole = "parallel.modules={\"blocks.1.*\": {\"zero_stage\": 0}, \"ln_f.*\": {\"zero_stage\": 0}}";
const std::string kSaysKeptWhole = "of them kept whole on every rank by parallel.modules";
// DeepSpeed's activation_checkpointing section: block inputs split over tp, in host memory, in one buffer.
const std::string kDeepSpeedActivationKeys =
    "activation_checkpointing={\"partition_activations\": true, \"cpu_checkpointing\": true, \"contiguous_memory_optimization\": true}";

struct Row {
  std::string name;
  int ranks;
  Sets sets;              // on top of the reference's job
  std::string reference;  // a key of kReferences, or an earlier row
  Bounds bounds;
  std::string says;  // a line of the run's output that shows the feature at work
};

// One row per line: name, ranks, overrides on the reference's job, reference, bounds, what the run says.
const std::vector<Row> kRows = {
    {"dp2", 2, k2Ranks, "gpt2", kFp32Reordered, "batch: 12 = micro 6 x accumulation 1 x dp 2"},
    {"dp4", 4, k4Ranks, "gpt2", kFp32Reordered, "batch: 12 = micro 3 x accumulation 1 x dp 4"},
    {"dp2_accumulation", 2, k2RanksAccumulating, "gpt2", kFp32Reordered, "batch: 12 = micro 3 x accumulation 2 x dp 2"},
    {"dp3_buckets", 3, k3RanksBuckets, "gpt2", kFp32Reordered, "batch: 12 = micro 2 x accumulation 2 x dp 3"},
    // AdamW updates each element from that element alone: updating shards and gathering them is plain data parallelism.
    {"zero1", 3, {"zero_optimization.stage=1"}, "dp3_buckets", kBitForBit, "ZeRO stage 1: optimizer state sharded over 3 rank(s)"},
    {"zero2", 3, k3RanksBuckets + Sets{"zero_optimization.stage=2"}, "gpt2", kFp32Reordered, "optimizer state and gradients sharded over 3"},
    {"zero3", 3, k3RanksBuckets + Sets{"zero_optimization.stage=3"}, "gpt2", kFp32Reordered, "blocks freed between forward and backward"},
    {"zero3_shard_grad_op", 3, k3RanksBuckets + Sets{"parallel.fsdp.sharding_strategy=shard_grad_op"}, "gpt2", kFp32Reordered,
     "kept whole from forward to backward"},
    {"hybrid_shard", 4, kHybrid, "gpt2", kFp32Reordered, "sharded over 2 rank(s) and replicated over 2 such groups (hybrid)"},
    // Recomputation repeats the same operations in the same order.
    {"ac_full", 2, {"train.activation_checkpointing=full"}, "dp2_accumulation", kBitForBit, "activation checkpointing full"},
    {"ac_selective", 2, {"train.activation_checkpointing=selective"}, "dp2_accumulation", kBitForBit, "activation checkpointing selective"},
    {"ac_every2", 2, {"train.activation_checkpointing=every:2"}, "dp2_accumulation", kBitForBit, "activation checkpointing every:2"},
    // However the checkpointed inputs are kept, the recomputation starts from the same bits.
    {"ac_deepspeed_keys", 2, {kDeepSpeedActivationKeys}, "ac_full", kBitForBit,
     "activation_checkpointing.contiguous_memory_optimization: checkpointed block inputs copied into one buffer"},

    // Tensor parallelism: every rank of a tp group computes its slice of each layer for the same batch.
    {"tp2", 2, {"parallel.tp=2"}, "gpt2_tp", kFp32Reordered, "tensor parallel: tp 2"},
    {"tp2_sp", 2, {"parallel.tp=2", "parallel.sequence_parallel=true"}, "gpt2_tp", kFp32Reordered, "sequence parallel: norms and residuals on 2"},
    {"dp2_tp2", 4, k2Ranks + Sets{"parallel.tp=2"}, "gpt2_tp", kFp32Reordered, "batch: 12 = micro 6 x accumulation 1 x dp 2"},
    {"tp2_zero3", 4, k2Ranks + Sets{"parallel.tp=2", "zero_optimization.stage=3"}, "gpt2_tp", kFp32Reordered,
     "ZeRO stage 3: parameters, gradients and optimizer state sharded over 2"},
    {"tp2_zero1_accumulation", 4, k2RanksAccumulating + Sets{"parallel.tp=2", "zero_optimization.stage=1"}, "gpt2_tp", kFp32Reordered,
     "ZeRO stage 1: optimizer state sharded over 2"},
    {"tp2_sp_ac_full", 2, {"train.activation_checkpointing=full"}, "tp2_sp", kBitForBit, "activation checkpointing full"},
    {"tp2_sp_ac_selective", 2, {"train.activation_checkpointing=selective"}, "tp2_sp", kBitForBit, "activation checkpointing selective"},
    // Each tp rank keeps half of a block's input and the two gather it for the recomputation: the
    // same bits, since the tp ranks' replicated parameters (and so the block inputs they compute) stay
    // equal. Under sequence parallelism the input already is a half, kept as it is, so nothing is gathered.
    {"tp2_ac_partition", 2, {"train.activation_checkpointing=full", kDeepSpeedActivationKeys}, "tp2", kBitForBit,
     "partition_activations: each checkpointed block input kept as 1/2 per rank over the tp group (global ranks 0,1)"},
    {"tp2_sp_ac_partition", 2, {kDeepSpeedActivationKeys}, "tp2_sp_ac_full", kBitForBit, "nothing more to partition"},

    {"llama_dp2", 2, k2Ranks, "llama", kFp32Reordered, "batch: 12 = micro 6 x accumulation 1 x dp 2"},
    {"llama_dp4", 4, k4Ranks, "llama", kFp32Reordered, "batch: 12 = micro 3 x accumulation 1 x dp 4"},
    {"llama_dp2_accumulation", 2, k2RanksAccumulating, "llama", kFp32Reordered, "batch: 12 = micro 3 x accumulation 2 x dp 2"},
    {"llama_dp3_buckets", 3, k3RanksBuckets, "llama", kFp32Reordered, "batch: 12 = micro 2 x accumulation 2 x dp 3"},
    {"llama_zero1", 3, {"zero_optimization.stage=1"}, "llama_dp3_buckets", kBitForBit, "ZeRO stage 1: optimizer state sharded over 3"},
    {"llama_zero2", 3, k3RanksBuckets + Sets{"zero_optimization.stage=2"}, "llama", kFp32Reordered, "gradients sharded over 3"},
    // Recomputing a block in backward must find its parameters gathered again.
    {"llama_zero3_recompute", 3, k3RanksBuckets + Sets{"zero_optimization.stage=3", "train.activation_checkpointing=full"}, "llama",
     kFp32Reordered, "blocks freed between forward and backward"},
    {"llama_hybrid_shard", 4, kHybrid, "llama", kFp32Reordered, "replicated over 2 such groups (hybrid)"},
    {"llama_tp2", 2, {"parallel.tp=2"}, "llama_tp", kFp32Reordered, "key/value heads 0..0"},
    {"llama_tp2_ac_partition", 2, {"train.activation_checkpointing=full", kDeepSpeedActivationKeys}, "llama_tp2", kBitForBit,
     "partition_activations: each checkpointed block input kept as 1/2 per rank"},
    {"llama_tp2_sp", 2, {"parallel.tp=2", "parallel.sequence_parallel=true"}, "llama_tp", kFp32Reordered, "sequence parallel"},
    // 4 query heads and 2 key/value heads over 4 ranks: each pair of ranks shares a key/value head.
    {"llama_tp4", 4, {"parallel.tp=4"}, "llama_tp", kFp32Reordered, "key/value weights replicated"},
    {"llama_tp4_sp", 4, {"parallel.tp=4", "parallel.sequence_parallel=true"}, "llama_tp", kFp32Reordered, "key/value weights replicated"},
    {"llama_dp2_tp2_zero2", 4, k2Ranks + Sets{"parallel.tp=2", "zero_optimization.stage=2"}, "llama_tp", kFp32Reordered, "tensor parallel: tp 2"},

    {"bf16_dp2", 2, k2Ranks, "gpt2_bf16", kBf16Reordered, "precision bf16 (fp32 master weights, fp32 gradients"},
    {"bf16_dp2_accumulation", 2, kBf16Accumulating, "gpt2_bf16", kBf16Reordered, "precision bf16 (fp32 master weights, bf16 gradients"},
    // Stages 2 and 3 send bf16 gradients and sum the micro-batches into their fp32 shard; stage 3
    // rounds each unit's working copy as it gathers it.
    {"bf16_zero2", 2, kBf16Accumulating + Sets{"zero_optimization.stage=2"}, "gpt2_bf16", kBf16Reordered, "ZeRO stage 2"},
    {"bf16_zero3", 2, kBf16Accumulating + Sets{"zero_optimization.stage=3"}, "gpt2_bf16", kBf16Reordered,
     "matmul weights gathered in bf16"},
    {"bf16_tp2", 2, {"parallel.tp=2"}, "gpt2_bf16", kBf16Reordered, "tensor parallel: tp 2"},
    {"bf16_tp2_sp_zero3", 4, kBf16Accumulating + Sets{"parallel.tp=2", "parallel.sequence_parallel=true", "zero_optimization.stage=3"},
     "gpt2_bf16", kBf16Reordered, "sequence parallel"},
    // fp16's loss scaler decides from the norm of every tp rank's slices together.
    {"fp16_tp2", 2, {"parallel.tp=2"}, "gpt2_fp16", kFp16Reordered, "tensor parallel: tp 2"},
    {"fp16_tp2_sp", 2, {"parallel.tp=2", "parallel.sequence_parallel=true"}, "gpt2_fp16", kFp16Reordered, "sequence parallel"},
    {"fp16_dp2_tp2_zero3", 4, k2Ranks + Sets{"parallel.tp=2", "zero_optimization.stage=3"}, "gpt2_fp16", kFp16Reordered, "ZeRO stage 3"},

    // Pipeline parallelism: the micro-batches of a step run through the stages and their gradients
    // accumulate, as one rank accumulates them; the tied embedding's copies sum theirs.
    {"pp2_gpipe", 2, kPp2 + schedule("gpipe"), "gpt2_pp", kFp32Reordered, "pipeline parallel: pp 2 x 1 virtual stage(s), 2 chunks of 4, 4"},
    {"pp2_1f1b", 2, kPp2 + schedule("1f1b"), "gpt2_pp", kFp32Reordered, "schedule 1f1b, 4 micro-batches per step"},
    {"pp4_1f1b", 4, kPp4 + schedule("1f1b"), "gpt2_pp", kFp32Reordered, "4 chunks of 2, 2, 2, 2 blocks"},
    {"pp2_interleaved", 2, kPp2 + schedule("interleaved_1f1b", 2), "gpt2_pp", kFp32Reordered, "pp 2 x 2 virtual stage(s)"},
    {"pp4_interleaved", 4, kPp4 + schedule("interleaved_1f1b", 2), "gpt2_pp", kFp32Reordered, "pp 4 x 2 virtual stage(s)"},
    {"pp2_zero_bubble", 2, kPp2 + schedule("zero_bubble"), "gpt2_pp", kFp32Reordered, "schedule zero_bubble"},
    {"pp4_zero_bubble", 4, kPp4 + schedule("zero_bubble"), "gpt2_pp", kFp32Reordered, "schedule zero_bubble"},
    // Context parallelism: every rank of a cp group computes its part of each sequence of the same batch.
    {"cp2_ring", 2, kCp2, "gpt2_cp", kFp32Reordered, "context parallel: cp 2, ring attention"},
    {"cp4_ring", 4, kCp4, "gpt2_cp", kFp32Reordered, "this rank holds tokens [0,2) [14,16) of each sequence of 16"},
    {"cp2_ulysses", 2, kCp2 + kUlysses, "gpt2_cp", kFp32Reordered, "context parallel: cp 2, Ulysses"},
    {"dp2_cp2", 4, k2Ranks + kCp2, "gpt2_cp", kFp32Reordered, "cp groups: [0,1] [2,3]"},
    {"cp2_tp2", 4, kCp2 + Sets{"parallel.tp=2"}, "gpt2_cp", kFp32Reordered, "tensor parallel: tp 2"},
    {"cp2_tp2_sp", 4, kCp2 + Sets{"parallel.tp=2", "parallel.sequence_parallel=true"}, "gpt2_cp", kFp32Reordered, "sequence parallel"},
    {"cp2_zero3", 2, kCp2 + Sets{"zero_optimization.stage=3"}, "gpt2_cp", kFp32Reordered, "ZeRO stage 3: parameters, gradients and optimizer state sharded over 2"},
    // Recomputation runs the ring again, in the same order: the same bits.
    {"cp2_ac_full", 2, {"train.activation_checkpointing=full"}, "cp2_ring", kBitForBit, "activation checkpointing full"},
    {"cp2_ac_selective", 2, {"train.activation_checkpointing=selective"}, "cp2_ring", kBitForBit, "activation checkpointing selective"},
    {"llama_cp2_ring", 2, kCp2, "llama_cp", kFp32Reordered, "context parallel: cp 2, ring attention"},
    {"llama_cp4_ring", 4, kCp4, "llama_cp", kFp32Reordered, "context parallel: cp 4, ring attention"},
    {"llama_cp2_ulysses", 2, kCp2 + kUlysses, "llama_cp", kFp32Reordered, "context parallel: cp 2, Ulysses"},
    {"llama_dp2_cp2", 4, k2Ranks + kCp2, "llama_cp", kFp32Reordered, "batch: 12 = micro 6 x accumulation 1 x dp 2"},
    {"llama_cp2_tp2", 4, kCp2 + Sets{"parallel.tp=2"}, "llama_cp", kFp32Reordered, "tensor parallel: tp 2"},
    {"llama_cp2_zero3", 2, kCp2 + Sets{"zero_optimization.stage=3"}, "llama_cp", kFp32Reordered, "ZeRO stage 3"},
    {"llama_cp2_ac_full", 2, {"train.activation_checkpointing=full"}, "llama_cp2_ring", kBitForBit, "activation checkpointing full"},
    {"bf16_cp2", 2, kCp2, "gpt2_bf16", kBf16Reordered, "context parallel: cp 2"},
    {"bf16_cp2_ulysses", 2, kCp2 + kUlysses, "gpt2_bf16", kBf16Reordered, "context parallel: cp 2, Ulysses"},
    // The stages hand on this cp rank's part of the sequence.
    {"pp2_cp2", 4, kPp2 + kCp2, "gpt2_pp_3d", kFp32Reordered, "context parallel: cp 2"},
    // ... and under sequence parallelism this tp rank's part of that: the 4D mesh.
    {"pp2_cp2_tp2_sp", 8, kPp2 + kCp2 + Sets{"parallel.tp=2", "parallel.sequence_parallel=true"}, "gpt2_pp_3d", kFp32Reordered,
     "sequence parallel"},

    // An explicit cut; the global norm sums the stages' squares in other groups.
    {"pp2_split", 2, kPp2 + Sets{"parallel.pipeline.split=[3,5]"}, "gpt2_pp", kFp32Reordered, "pipeline split (given): chunks of 3, 5 blocks"},
    // A cut from costs timed at start-up: whichever it is, the arithmetic is the pipeline's.
    {"pp2_split_measured", 2, kPp2 + Sets{"parallel.pipeline.split=\"auto\""}, "gpt2_pp", kFp32Reordered, "pipeline split (measured: "},

    {"pp2_dp2_zero1", 4, kPp2 + Sets{"zero_optimization.stage=1"}, "gpt2_pp_3d", kFp32Reordered, "batch: 12 = micro 3 x accumulation 2 x dp 2"},
    {"pp2_dp2_zero2", 4, kPp2 + Sets{"zero_optimization.stage=2"}, "gpt2_pp_3d", kFp32Reordered, "ZeRO stage 2"},
    {"pp2_dp2_zero3", 4, kPp2 + Sets{"zero_optimization.stage=3"}, "gpt2_pp_3d", kFp32Reordered,
     "units gathered once per step and held through the pipeline's micro-batches"},
    {"pp2_tp2", 4, kPp2 + Sets{"parallel.tp=2"}, "gpt2_pp_3d", kFp32Reordered, "tensor parallel: tp 2"},
    {"pp2_dp2_tp2", 8, kPp2 + Sets{"parallel.tp=2"}, "gpt2_pp_3d", kFp32Reordered, "batch: 12 = micro 3 x accumulation 2 x dp 2"},
    {"pp2_ac_full", 2, kPp2 + Sets{"train.activation_checkpointing=full"}, "gpt2_pp_3d", kFp32Reordered, "activation checkpointing full"},
    // Sequence parallelism hands the next stage this tp rank's part of the sequence.
    {"pp2_tp2_sp", 4, kPp2 + Sets{"parallel.tp=2", "parallel.sequence_parallel=true"}, "gpt2_pp_3d", kFp32Reordered, "sequence parallel"},
    // Recomputed blocks leave their weight gradients to W like the others.
    {"pp2_zero_bubble_ac_full", 2, kPp2 + schedule("zero_bubble") + Sets{"train.activation_checkpointing=full"}, "gpt2_pp_3d",
     kFp32Reordered, "schedule zero_bubble"},

    {"llama_pp2_gpipe", 2, kPp2 + schedule("gpipe"), "llama_pp", kFp32Reordered, "schedule gpipe"},
    {"llama_pp4_gpipe", 4, kPp4 + schedule("gpipe"), "llama_pp", kFp32Reordered, "schedule gpipe"},
    {"llama_pp2_1f1b", 2, kPp2 + schedule("1f1b"), "llama_pp", kFp32Reordered, "schedule 1f1b"},
    {"llama_pp4_1f1b", 4, kPp4 + schedule("1f1b"), "llama_pp", kFp32Reordered, "schedule 1f1b"},
    {"llama_pp2_interleaved", 2, kPp2 + schedule("interleaved_1f1b", 2), "llama_pp", kFp32Reordered, "schedule interleaved_1f1b"},
    {"llama_pp4_interleaved", 4, kPp4 + schedule("interleaved_1f1b", 2), "llama_pp", kFp32Reordered, "schedule interleaved_1f1b"},
    {"llama_pp2_zero_bubble", 2, kPp2 + schedule("zero_bubble"), "llama_pp", kFp32Reordered, "schedule zero_bubble"},
    {"llama_pp4_zero_bubble", 4, kPp4 + schedule("zero_bubble"), "llama_pp", kFp32Reordered, "schedule zero_bubble"},
    // Point-to-point messages over Gloo as across nodes, rather than shared memory.
    {"llama_pp2_gloo", 2, kPp2 + Sets{"dist.backend=gloo"}, "llama_pp", kFp32Reordered, "backend gloo"},
    {"llama_pp2_dp2_zero1", 4, kPp2 + Sets{"zero_optimization.stage=1"}, "llama_pp", kFp32Reordered, "ZeRO stage 1"},
    // A later stage takes this tp rank's part of the sequence; RoPE turns the whole of it that attention sees.
    {"llama_pp2_tp2_sp", 4, kPp2 + Sets{"parallel.tp=2", "parallel.sequence_parallel=true"}, "llama_pp", kFp32Reordered, "sequence parallel"},
    {"llama_pp2_tp2_zero3", 8, kPp2 + Sets{"parallel.tp=2", "zero_optimization.stage=3", "parallel.pipeline.schedule=zero_bubble"}, "llama_pp",
     kFp32Reordered, "ZeRO stage 3"},

    // Per-module plans: 3 ranks pad the sharded buckets (not those kept whole) and accumulate two
    // micro-batches into the shard; hybrid sharding averages the whole buckets across replicas too;
    // tensor-parallel slices inside what is kept whole count once per tp rank in the norm; a
    // pipeline's stages keep their own parts whole; bf16 rounds the working copies of a unit kept
    // whole after its copy from the shard, and sends its gradients in bf16.
    {"zero1_modules", 3, k3RanksBuckets + Sets{"zero_optimization.stage=1", kKeepWhole}, "gpt2_modules", kFp32Reordered, kSaysKeptWhole},
    {"zero2_modules", 3, k3RanksBuckets + Sets{"zero_optimization.stage=2", kKeepWhole}, "gpt2_modules", kFp32Reordered, kSaysKeptWhole},
    {"zero3_modules", 3, k3RanksBuckets + Sets{"zero_optimization.stage=3", kKeepWhole}, "gpt2_modules", kFp32Reordered, kSaysKeptWhole},
    {"hybrid_shard_modules", 4, kHybrid + Sets{kKeepWhole}, "gpt2_modules", kFp32Reordered, kSaysKeptWhole},
    {"tp2_zero3_modules", 4, k2Ranks + Sets{"parallel.tp=2", "zero_optimization.stage=3", kKeepWhole}, "gpt2_modules", kFp32Reordered,
     kSaysKeptWhole},
    {"pp2_dp2_zero3_modules", 4, kPp2 + Sets{"zero_optimization.stage=3", kKeepWhole}, "gpt2_pp_3d", kFp32Reordered, kSaysKeptWhole},
    {"bf16_zero3_modules", 2, kBf16Accumulating + Sets{"zero_optimization.stage=3", kKeepWhole}, "gpt2_bf16_modules", kBf16Reordered,
     kSaysKeptWhole},

    {"bf16_pp2", 2, kPp2, "gpt2_bf16_pp", kBf16Reordered, "pipeline parallel: pp 2"},
    // The loss scaler decides from the norm over both stages.
    {"fp16_pp2", 2, kPp2, "gpt2_fp16", kFp16Reordered, "pipeline parallel: pp 2"},
};

const Row* row_named(const std::string& name) {
  for (const Row& row : kRows)
    if (row.name == name) return &row;
  return nullptr;
}

// The one-rank reference a row's chain of references ends at.
std::string root_of(const Row& row) {
  const Row* up = row_named(row.reference);
  return up ? root_of(*up) : row.reference;
}

// A row's whole job: its reference's, then its own overrides.
Sets job_of(const std::string& name) {
  const Row* row = row_named(name);
  return row ? job_of(row->reference) + row->sets : kMatrixJob + kReferences.at(name);
}

std::string describe(const std::string& name) {
  const Row* row = row_named(name);
  std::string sets;
  for (const auto& s : row ? row->sets : kReferences.at(name)) sets += " " + s;
  return name + " (" + std::to_string(row ? row->ranks : 1) + " rank(s):" + sets + ")";
}

class FeatureMatrix : public ::testing::TestWithParam<std::string> {
 protected:
  // Each job runs once, however many rows compare against it.
  const TrainingRun& run(const std::string& name) {
    auto it = runs_.find(name);
    if (it != runs_.end()) return it->second;
    const Row* row = row_named(name);
    return runs_.emplace(name, train(scratch_dir("matrix_" + name), row ? row->ranks : 1, job_of(name))).first->second;
  }

 private:
  std::map<std::string, TrainingRun> runs_;
};

// Every row whose references lead to this one-rank job.
TEST_P(FeatureMatrix, EveryRowTrainsLikeItsReference) {
  const TrainingRun& reference = run(GetParam());
  ASSERT_EQ(reference.result.exit_code, 0) << reference.result.output;
  ASSERT_FALSE(reference.steps.empty());
  // A reference that does not learn would make every comparison with it vacuous.
  EXPECT_LT(reference.steps.back()["loss"].get<double>(), reference.steps.front()["loss"].get<double>()) << describe(GetParam());
  int rows = 0;
  for (const Row& row : kRows) {
    if (root_of(row) != GetParam()) continue;
    ++rows;
    const TrainingRun& got = run(row.name);
    if (got.result.exit_code == 0) EXPECT_TRUE(contains(got.result.output, row.says)) << row.name << " never says '" << row.says << "'";
    expect_equivalent(got, run(row.reference), row.bounds, "row " + describe(row.name) + " against " + describe(row.reference));
  }
  EXPECT_GT(rows, 0) << "no row compares against " << GetParam();
}

std::vector<std::string> reference_names() {
  std::vector<std::string> names;
  for (const auto& [name, sets] : kReferences) names.push_back(name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(References, FeatureMatrix, ::testing::ValuesIn(reference_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// A row names a reference that exists, before it, and an existing row joins the test of its root.
TEST(FeatureMatrixTable, EveryRowNamesAKnownReferenceAndIsNamedOnce) {
  for (size_t i = 0; i < kRows.size(); ++i) {
    EXPECT_EQ(row_named(kRows[i].name), &kRows[i]) << kRows[i].name << " is named twice";
    EXPECT_FALSE(kReferences.count(kRows[i].name)) << kRows[i].name << " is also a reference";
    const Row* up = row_named(kRows[i].reference);
    EXPECT_TRUE(up ? up < &kRows[i] : kReferences.count(kRows[i].reference) > 0)
        << kRows[i].name << ": reference " << kRows[i].reference << " is neither a one-rank reference nor an earlier row";
  }
}

}  // namespace
}  // namespace dtrain::test
