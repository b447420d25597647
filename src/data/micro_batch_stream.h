// The training input of one rank: micro-batches drawn through its DistributedSampler, epoch after
// epoch. Its position (epoch, samples all ranks have consumed in the epoch) is what a checkpoint
// saves, so a resumed run continues with exactly the batches the uninterrupted run would have seen,
// whatever its number of ranks: the sampler deals round-robin, so the first k samples of each of R
// ranks are the first k·R samples of the epoch's permutation, and a resume deals the rest of the
// epoch from the saved position, whether or not it divides by the new R. An epoch ends when less
// than one global batch is left of it: the dropped tail depends on the global batch only, never on
// the number of ranks or the micro-batch, and no step mixes two epochs. Samples are drawn from the
// sampler one index at a time, so the stream holds no list of the epoch's samples of its own.
#pragma once
#include <nlohmann/json.hpp>

#include <memory>
#include <vector>

#include "data/distributed_sampler.h"
#include "data/sample_dataset.h"
#include "data/sample_log.h"

namespace dtrain {

struct DataPosition {
  int64_t epoch = 0;
  int64_t samples = 0;  // samples all ranks together have consumed in `epoch`
};
nlohmann::json to_json(const DataPosition& p);

class MicroBatchStream {
 public:
  // A step draws `micro_batches_per_step` micro-batches on each rank: a global batch of
  // micro_batch x micro_batches_per_step x num_replicas samples.
  MicroBatchStream(std::shared_ptr<const SampleDataset> dataset, int num_replicas, int rank, int micro_batch,
                   int64_t micro_batches_per_step, SamplerOptions options);

  // This rank's next micro-batch of training samples, with their images when the dataset has them.
  Batch next();
  DataPosition position() const { return {sampler_.epoch(), first_ + offset_ * num_replicas_}; }
  // At a step's boundary: the position a checkpoint saved. Throws when it is outside the epoch.
  void restore(const DataPosition& p);
  // At a step's boundary: a resume that changed the global batch.
  void set_micro_batches_per_step(int64_t n);

 private:
  void start_epoch(int64_t epoch, int64_t first);
  int64_t step_samples() const { return int64_t(micro_batch_) * per_step_ * num_replicas_; }

  std::shared_ptr<const SampleDataset> dataset_;
  DistributedSampler sampler_;
  int num_replicas_, micro_batch_;
  int64_t per_step_ = 1;
  int64_t first_ = 0;   // where in the epoch this stream started dealing (a restored position)
  int64_t offset_ = 0;  // this rank's samples drawn since
  int64_t drawn_ = 0;   // micro-batches drawn in the current step
  std::unique_ptr<SampleLog> sample_log_;
};

}  // namespace dtrain
