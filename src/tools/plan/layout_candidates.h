// The layouts `dtrain estimate --plan` considers for a world size: every dp × tp × pp × cp that
// multiplies to it, sequence parallelism on or off under tp, ZeRO stage 0-3 where its group (dp × cp) has more than one
// rank (with one, every stage is the same layout), optimizer offload to the
// CPU under ZeRO when asked (the planner will ask where it moves something once the step's cost
// prices it), activation checkpointing none, full or
// selective, and every power-of-two micro-batch that divides the config's global batch over the dp
// ranks. Each is a list of `--set` lines over the user's config, so that it is checked by the same
// config resolution a run applies (layout_planner.h).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace dtrain {

struct LayoutChoice {
  int dp = 1, tp = 1, pp = 1, cp = 1;
  bool sequence_parallel = false;
  int zero_stage = 0;
  bool offload_optimizer = false;
  std::string checkpointing = "none";  // train.activation_checkpointing
  int64_t global_batch = 1, micro_batch = 1, accumulation = 1;

  // The --set lines that give a config this layout, keys in a fixed order.
  std::vector<std::string> sets() const;
  // "dp 2, ZeRO-1, AC none, micro-batch 4 × 2" (only the parallelisms in use).
  std::string describe() const;
};

struct CandidateOptions {
  int world_size = 1;
  int64_t global_batch = 1;     // sequences per optimizer step, kept by every layout
  int64_t max_micro_batch = 0;  // the largest micro-batch tried; 0: up to global_batch / dp
  bool offload = false;         // try offload_optimizer.device=cpu under ZeRO
};

std::vector<LayoutChoice> enumerate_layouts(const CandidateOptions& options);

}  // namespace dtrain
