// PyTorch's DistributedSampler: every epoch a permutation of the samples (seeded by seed + epoch, or
// the identity without shuffle), made divisible by the number of replicas — by dropping the tail
// (drop_last) or repeating the head — and dealt round-robin: replica r takes positions r, r+R, ...
// Dealing round-robin is what makes layouts interchangeable: the first k samples of every replica
// together are the first k·R samples of the permutation, whatever R is, for every order.
// The identity and the hashed order are computed per index and cost no memory; PyTorch's randperm
// order is materialized when an epoch starts, this replica's share of it kept (data/shuffle_order.h).
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include "data/hashed_permutation.h"
#include "data/shuffle_order.h"

namespace dtrain {

struct SamplerOptions {
  bool shuffle = true;
  uint64_t seed = 0;
  bool drop_last = false;
  ShuffleOrder order = ShuffleOrder::Randperm;  // which permutation shuffle follows
};

class DistributedSampler {
 public:
  // Starts at epoch 0.
  DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options);

  // Deals the epoch's permutation from position `first` (in [0, dataset_size]): replica r takes
  // first + r, first + r + R, ... A run resumed mid-epoch at another number of replicas continues
  // there, wherever the position falls among the replicas.
  void set_epoch(int64_t epoch, int64_t first = 0);
  int64_t epoch() const { return epoch_; }
  // How many samples this replica gets per epoch.
  int64_t num_samples() const { return num_samples_; }
  // This replica's i-th sample of the current epoch, i in [0, num_samples()).
  int64_t index(int64_t i) const;
  // This replica's samples for the current epoch, in order: index(0), index(1), ...
  std::vector<int64_t> indices() const;

 private:
  // Where this replica's i-th sample sits in the padded permutation, wrapped into [0, dataset_size).
  int64_t position(int64_t i) const;

  int64_t dataset_size_;
  int num_replicas_, rank_;
  SamplerOptions options_;
  int64_t epoch_ = 0, first_ = 0;
  int64_t num_samples_ = 0;
  std::vector<int64_t> randperm_share_;     // the randperm order: this replica's samples of the epoch
  std::optional<HashedPermutation> hashed_;  // the hashed order: the epoch's permutation
};

}  // namespace dtrain
