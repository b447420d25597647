// Where the optimizer state of a ZeRO shard lives: beside the parameters, in host memory updated by
// the CPU (offload_optimizer.device=cpu on an accelerator), or in files under nvme_path.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "optim/flat_optimizer.h"
#include "optim/flat_parameters.h"
#include "parallel/zero/fully_sharded_parameters.h"
#include "train/train_config.h"

namespace dtrain {

// The optimizer of this rank's `numel` shard elements of `flat`, on `device`. `sharded` is ZeRO-3's
// parameter shard (null below stage 3): an offloaded one is not staged again, and one in a file
// streams through the NVMe optimizer's buffers. What was set up goes to `setup_lines`.
std::unique_ptr<ElementwiseOptimizer> make_shard_optimizer(const TrainConfig& config, at::Device device, const FlatParameters& flat,
                                                           FullyShardedParameters* sharded, int64_t numel,
                                                           std::vector<std::string>& setup_lines);

}  // namespace dtrain
