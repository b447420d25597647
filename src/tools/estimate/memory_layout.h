// What the memory estimate reads: one run's model, how it is laid out over the ranks and what each
// rank keeps, as plain values. It is built from a resolved config (train/estimate_layout.h) or, by a
// planner, for any candidate layout: the estimate is a pure function of it (memory_estimate.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "model/activation_checkpoint.h"
#include "model/transformer_config.h"
#include "parallel/pipeline/schedule_kind.h"

namespace dtrain {

struct MemoryLayout {
  TransformerConfig model;

  // The mesh (parallel/parallel_dims.h): data-parallel ranks (dp_shard × dp_replicate), of which
  // ZeRO shards over dp_shard; tensor, pipeline and context parallelism.
  int dp = 1, dp_shard = 1;
  int tp = 1, pp = 1, cp = 1;
  bool sequence_parallel = false;
  // The pipeline (parallel/pipeline): its schedule and each stage's blocks (parallel.pipeline.split;
  // empty: n_layer / pp each). The micro-batches of a step are `accumulation`.
  ScheduleKind schedule = ScheduleKind::OneFOneB;
  int virtual_stages = 1;
  std::vector<int> split;
  // Ranks per node: what one node's memory holds (per-node totals, and the share of a CPU host).
  int ranks_per_node = 1;

  int zero_stage = 0;
  bool reshard_after_forward = true;  // ZeRO-3: blocks freed between their forward and backward
  bool gather_16bit = false;          // ZeRO-3: every unit with matmul weights gathered in 16 bits
  int64_t reduce_bucket_elements = 6250000;
  // data_types.grad_accum_dtype 16-bit: DDP and ZeRO-1 send each bucket as a copy in the compute type.
  bool grad_accum_16bit = false;
  std::string offload_optimizer = "none", offload_param = "none";  // none | cpu | nvme
  int64_t sub_group_size = 0;  // NVMe offload's sub-group in elements; 0: "auto" (parallel/zero/nvme_sub_groups.h)

  int64_t micro_batch = 1;   // sequences per micro-batch on one data-parallel rank
  // A vision-language model's: the patches of the largest image a sample may hold (one image a sample).
  int64_t max_image_patches = 0;
  int64_t accumulation = 1;  // micro-batches per optimizer step
  ActivationCheckpointing activation_checkpointing;

  // The compute type's bytes: 4 without mixed precision, 2 under bf16 or fp16 (fp32 master weights).
  int compute_bytes = 4;
  // Whether 16-bit GEMMs run natively (MixedPrecision::native_gemm): false for bf16 on a CPU without
  // AVX512-BF16 and fp16 without AVX512-FP16, whose GEMMs widen their 16-bit operands to fp32 copies
  // (the estimate refuses those: memory_estimate.cpp).
  bool native_gemm = true;
  // Optimizer state per parameter, in bytes (AdamW: two fp32 moments, 8; SGD with momentum: 4).
  double optimizer_bytes = 8;
  std::string optimizer_name = "AdamW";

  // Where the rank computes: the CPU build's ranks keep everything in host memory.
  bool device_is_cpu = true;

  // Parameters by name (parameter_shapes.h) that train.freeze or parallel.modules freeze, and the
  // trainable ones parallel.modules keeps whole on every rank of a ZeRO run (zero_stage 0).
  std::vector<std::string> frozen, kept_whole;

  // Settings of the config this estimate does not model, by their keys ("train.freeze"): the
  // estimate is then refused naming them, never a silently wrong number.
  std::vector<std::string> unmodelled;
};

}  // namespace dtrain
