// The validation loss: the first train.eval_samples validation samples, shared over the
// data-parallel ranks by index, averaged over all of them (a collective).
#pragma once
#include <optional>

#include "comm/world.h"
#include "data/sample_dataset.h"
#include "model/transformer.h"
#include "train/parallelize.h"
#include "train/step_executor.h"
#include "train/train_config.h"

namespace dtrain {

// Each batch's loss comes from `executor` (a pipeline's runs through its stages). nullopt when the
// dataset holds no validation samples.
std::optional<double> validation_loss(Transformer& model, ParallelPlan& plan, StepExecutor& executor, const SampleDataset& dataset,
                                      const TrainConfig& config, World& world);

}  // namespace dtrain
