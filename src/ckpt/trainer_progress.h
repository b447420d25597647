// Where a training run was when its checkpoint was taken: the step, the data position, the counters
// of the stability guard, the precision and fp16's loss scaler. A checkpoint stores it as
// trainer_state.json, beside the run's learning-rate schedule (which a resume compares with its own).
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

#include "data/micro_batch_stream.h"

namespace dtrain {

struct TrainerProgress {
  int64_t step = 0;  // optimizer steps finished
  DataPosition data;
  int64_t skipped_steps = 0;
  double tokens_seen = 0;
  double lr_scale = 1;    // the factor rollbacks after a divergence have lowered the learning rate by
  double batch_lr_scale = 1;  // the factor resumes at another global batch under elastic.batch_policy=scale_lr applied
  int64_t rollbacks = 0;
  std::string precision = "fp32";  // what the run computed in: fp32, bf16 or fp16 (the weights are fp32 in every case)
  nlohmann::json loss_scaler;      // fp16's loss scaler state (optim/loss_scaler.h's format); null in other precisions
};

constexpr const char* kTrainerStateFile = "trainer_state.json";

// trainer_state.json's content: `progress` and the run's `scheduler` section.
nlohmann::json trainer_state_json(const TrainerProgress& progress, const nlohmann::json& scheduler);

// dir/trainer_state.json, checked field by field and against `manifest_step`, the step the
// checkpoint's manifest records; throws naming the file and the field at fault. The loss scaler's
// state is taken as it is: its owner checks it.
TrainerProgress read_trainer_progress(const std::string& dir, int64_t manifest_step);

}  // namespace dtrain
