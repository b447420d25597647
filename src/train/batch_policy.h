// What a resume at another data-parallel size does with the global batch (elastic.batch_policy).
// The global batch is part of the training state: the data position counts whole batches and the
// loss curve depends on it. "keep" keeps the checkpoint's by changing the accumulation; when no
// whole accumulation makes it on the new ranks, it takes the nearest global batch they can make and
// keeps the learning rate. "scale_lr" trains with the config's own batch on the new ranks and scales
// the learning rate by new batch / old batch (Goyal et al.'s linear rule). "fail" refuses a batch the
// new ranks cannot make. train_batch_size, when given, wins over all three.
#pragma once
#include <nlohmann/json.hpp>
#include <string>

#include "train/rank_log.h"
#include "train/train_config.h"

namespace dtrain {

// The global batch a run resuming `dir` (its config `saved`) trains with, set in `config` (the
// accumulation, and the resolved keys of its json); every rank reaches the same answer and rank 0
// says what changed and which learning-rate rule applies.
void resume_global_batch(TrainConfig& config, const std::string& dir, const nlohmann::json& saved, RankLog& log);

// The factor scale_lr multiplies the learning rate by when this run continues a checkpoint whose
// config is `saved`: this run's global batch over the checkpoint's; 1 under the other policies, or
// when the batch is the same. A checkpoint this run wrote has this run's batch, so a rollback to it
// applies no second factor.
double batch_lr_factor(const TrainConfig& config, const nlohmann::json& saved);

}  // namespace dtrain
