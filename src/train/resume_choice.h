// What a start resumes and what a resume changes: the choice of checkpoint (rank 0's, by
// train.resume and the start rules of train/run_start.h), and what a run continuing one keeps or
// says it changes: the learning-rate schedule, the shuffle order, the model's settings (the global
// batch: train/batch_policy.h); and the checkpoint to go back to when training went wrong.
#pragma once
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/checkpoint_manager.h"
#include "comm/world.h"
#include "model/mixed_precision.h"
#include "model/transformer_config.h"
#include "optim/loss_scaler.h"
#include "optim/lr_schedule.h"
#include "train/rank_log.h"
#include "train/run_start.h"
#include "train/train_config.h"
#include "train/training_state.h"

namespace dtrain {

// Rank 0: the checkpoint `plan` resumes, found (verifying checksums, and loading it with `load` to
// prove it fits the model) in config.checkpoint.dir or at the path train.resume gives; "" to start
// from scratch. Throws rather than start over beside checkpoints none of which can be resumed.
std::string choose_checkpoint(const StartPlan& plan, CheckpointManager& checkpoints, const TrainConfig& config,
                              const std::function<void(const std::string&)>& load, RankLog& log);

// What a resume of `dir` (whose config.json is `saved`) changes without changing a tensor's shape,
// each said once as a warning: the learning-rate schedule (the rate is a function of the step, so
// another train.steps, scheduler or base rate jumps from one curve to the other: both rates are
// given), the shuffle order (data.shuffle_order changed, a corpus that crossed 2^23 samples under
// "auto", or a checkpoint from before the key, whose order was randperm: the epoch continues along
// another permutation), and the model's settings (model_changes).
void warn_of_resume_changes(const TrainConfig& config, const std::string& dir, const nlohmann::json& saved, const LrSchedule& schedule,
                            const TrainerProgress& progress, RankLog& log);

// The model keys whose values differ between a checkpoint's model section (`saved_model`) and this
// run's, as "model.KEY then -> now". The saved side goes through the parser, so a key written since
// the checkpoint was saved counts as the default it had then (a checkpoint from before
// model.vision.token_order was trained in rows).
std::vector<std::string> model_changes(const nlohmann::json& saved_model, const TransformerConfig& now);

// The checkpoint to advise after training went wrong (`why`: a name for the agreement): the newest
// healthy one that passes every check resume makes (checksums, finite tensors), never merely the
// newest whose manifest says healthy, which may hold poisoned weights. Rank 0 verifies, logging what
// it passes over; the others learn its answer. Every rank calls it.
std::optional<CheckpointInfo> last_good_checkpoint(World& world, CheckpointManager& checkpoints, const std::string& why, RankLog& log);

// The checkpoint's fp16 loss scaler (in `progress`) continues in `scaler` (null: this run is not
// fp16 and has none to continue); a checkpoint from another precision starts the scaler afresh.
void restore_loss_scaler(LossScaler* scaler, const TrainerProgress& progress, const MixedPrecision& precision, RankLog& log);

}  // namespace dtrain
