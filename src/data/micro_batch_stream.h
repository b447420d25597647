// The training input of one rank: micro-batches drawn through its DistributedSampler, epoch after
// epoch. Its position (epoch, samples all ranks have consumed in the epoch) is what a checkpoint
// saves, so a resumed run continues with exactly the batches the uninterrupted run would have seen,
// whatever its number of ranks: the sampler deals round-robin, so the first k samples of each of R
// ranks are the first k·R samples of the epoch's permutation. Samples are drawn from the sampler one
// index at a time, so the stream holds no list of the epoch's samples of its own.
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
  int64_t samples = 0;  // samples all ranks together have consumed in `epoch`
};
nlohmann::json to_json(const DataPosition& p);

class MicroBatchStream {
 public:
  // A partial micro-batch at the end of an epoch is skipped (the sampler drops the uneven tail too),
  // so every rank turns to the next epoch at the same step.
  MicroBatchStream(std::shared_ptr<const TokenDataset> dataset, int num_replicas, int rank, int micro_batch,
                   SamplerOptions options);

  std::pair<at::Tensor, at::Tensor> next();
  DataPosition position() const { return {sampler_.epoch(), offset_ * num_replicas_}; }
  // Throws when the position is outside the epoch or does not divide among this stream's ranks.
  void restore(const DataPosition& p);

 private:
  void start_epoch(int64_t epoch);

  std::shared_ptr<const TokenDataset> dataset_;
  DistributedSampler sampler_;
  int num_replicas_, micro_batch_;
  int64_t offset_ = 0;
};

}  // namespace dtrain
