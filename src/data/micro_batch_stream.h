// The training input of one rank: micro-batches drawn through its DistributedSampler, epoch after
// epoch. Its position (epoch, samples consumed in the epoch) is what a checkpoint saves, so a
// resumed run continues with exactly the batches the uninterrupted run would have seen.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <utility>
#include <vector>

#include "data/distributed_sampler.h"
#include "data/token_dataset.h"

namespace dtrain {

struct DataPosition {
  int64_t epoch = 0;
  int64_t offset = 0;  // samples this rank has consumed in `epoch`
};
nlohmann::json to_json(const DataPosition& p);
DataPosition data_position_from_json(const nlohmann::json& j);

class MicroBatchStream {
 public:
  // A partial micro-batch at the end of an epoch is skipped (the sampler drops the uneven tail too),
  // so every rank turns to the next epoch at the same step.
  MicroBatchStream(std::shared_ptr<const TokenDataset> dataset, int num_replicas, int rank, int micro_batch,
                   SamplerOptions options);

  std::pair<at::Tensor, at::Tensor> next();
  DataPosition position() const { return {sampler_.epoch(), offset_}; }
  void restore(const DataPosition& p);

 private:
  void start_epoch(int64_t epoch);

  std::shared_ptr<const TokenDataset> dataset_;
  DistributedSampler sampler_;
  int micro_batch_;
  std::vector<int64_t> epoch_indices_;
  int64_t offset_ = 0;
};

}  // namespace dtrain
