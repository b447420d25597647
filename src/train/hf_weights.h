// Where a run meets Hugging Face weights: a fresh start loading model.init_from, and a checkpoint
// exported beside each save (zero_optimization.stage3_gather_16bit_weights_on_model_save).
#pragma once
#include <string>

#include "comm/world.h"
#include "train/parallelize.h"
#include "train/rank_log.h"
#include "train/train_config.h"

namespace dtrain {

// Every rank reads its own pieces of config.init_from into the plan's parameters, as it would read
// a checkpoint's; when any rank fails, every rank throws (naming the first that failed).
void load_init_from(const TrainConfig& config, ParallelPlan& plan, World& world, RankLog& log);

// Rank 0's part of a save with export_hf_on_save: the committed checkpoint `dir`, in the run's
// precision, into `dir`/hf.
void export_save_to_hf(const TrainConfig& config, const std::string& dir, RankLog& log);

}  // namespace dtrain
