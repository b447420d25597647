// PyTorch's DistributedSampler: every epoch a permutation of the samples (seeded by seed + epoch, or
// the identity without shuffle), made divisible by the number of replicas — by dropping the tail
// (drop_last) or repeating the head — and dealt round-robin: replica r takes positions r, r+R, ...
// Dealing round-robin is what makes layouts interchangeable: the first k samples of every replica
// together are the first k·R samples of the permutation, whatever R is.
#pragma once
#include <cstdint>
#include <vector>

namespace dtrain {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
};

class DistributedSampler {
 public:
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options);

  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t epoch() const { return epoch_; }
  // How many samples this replica gets per epoch.
  int64_t num_samples() const { return num_samples_; }
  // This replica's samples for the current epoch, in order.
  std::vector<int64_t> indices() const;

 private:
  int64_t dataset_size_;
  int num_replicas_, rank_;
  SamplerOptions options_;
  int64_t epoch_ = 0;
  int64_t num_samples_;
};

}  // namespace dtrain
