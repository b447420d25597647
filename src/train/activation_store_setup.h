// DeepSpeed's activation_checkpointing keys applied to a run: the model gets the group
// partition_activations splits a checkpointed block input over, and the run's log one line for each
// key that is on, saying what it does here (or why it has nothing to do).
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "comm/device_mesh.h"
#include "model/transformer.h"
#include "train/train_config.h"

namespace dtrain {

// After model->set_activation_checkpointing(c.activation_checkpointing). Returns the log lines.
std::vector<std::string> apply_activation_store(Transformer& model, const TrainConfig& c, const DeviceMesh& mesh, const at::Device& device);

}  // namespace dtrain
