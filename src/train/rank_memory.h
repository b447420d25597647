// The least memory one training rank needs, from its config alone, for the launcher to check against
// the host before it starts any rank (launch/host_capacity.h).
#pragma once
#include <string>

#include "train/train_config.h"

namespace dtrain {

// What a rank takes before it holds any tensor: its process with LibTorch loaded and its threads
// started. A rank of the tiny model measures about 135 MiB resident; this stays well below, so that
// it never refuses what could run.
constexpr double kRankProcessBytes = 64.0 * (1 << 20);

struct RankMemory {
  double bytes = 0;  // the least one rank needs
  std::string how;   // how that adds up, for messages
};

// The process, plus the rank's share of the model's state on the host: fp32 weights and gradients
// (16-bit gradients under data_types.grad_accum_dtype) and the optimizer's moments (AdamW two, SGD
// with momentum one), each divided over the data-parallel ranks where ZeRO's stage shards it, and
// without what NVMe offload keeps on disk. On GPUs the state lives in device memory and only the
// process counts. Activations, batches and communication buffers come on top: a run this refuses
// could never have fit.
RankMemory rank_memory_floor(const TrainConfig& c, bool state_on_gpu);

// The memory estimate's peak for the most loaded of `ranks_per_node` ranks (tools/estimate, the
// process and LibTorch included), where the ranks keep everything in host memory (the CPU build) and
// the estimate covers the layout; 0 otherwise. The launcher warns with it; the floor refuses.
double estimated_rank_peak_on_host(const TrainConfig& c, bool state_on_gpu, int ranks_per_node);

// Bytes of optimizer state per parameter: the flat state the optimizer `spec` (the config's
// optimizer section) keeps, as it would keep it (AdamW: 8; SGD with momentum: 4).
double optimizer_state_bytes(const nlohmann::json& spec);

}  // namespace dtrain
