// The start-up summary of what parallelize() built (train/parallelize.h): the model and its
// precision, the loss scale, data parallelism's buckets and what is frozen, parallel.modules' plan,
// the ZeRO stage and what this rank owns, the model states this rank holds, and the batch's shape.
// Kept apart from the steps that build the plan, which it only reads.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "model/mixed_precision.h"
#include "train/parallelize.h"
#include "train/train_config.h"

namespace dtrain {

// What the summary needs beside the plan and the config: facts parallelize() learnt on the way.
struct PlanFacts {
  at::Device device;
  MixedPrecision precision;
  int shard_group_size = 1;  // the ranks ZeRO shards over
  int64_t owned_numel = 0;   // the parameters this rank's ZeRO shard owns
};

// One line per item, in the order above.
std::vector<std::string> describe_parallel_plan(const ParallelPlan& plan, const TrainConfig& c, const PlanFacts& facts);

}  // namespace dtrain
