#include "data/distributed_sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <stdexcept>
#include <string>

namespace dtrain {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw std::invalid_argument("sampler: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(num_replicas) + ")");
  set_epoch(0);
  if (num_samples_ < 1)
    throw std::invalid_argument("sampler: " + std::to_string(dataset_size) + " samples cannot give each of " +
                                std::to_string(num_replicas) + " replicas one");
}

void DistributedSampler::set_epoch(int64_t epoch, int64_t first) {
  if (first < 0 || first > dataset_size_)
    throw std::out_of_range("sampler: position " + std::to_string(first) + " is outside an epoch of " + std::to_string(dataset_size_));
  epoch_ = epoch;
  first_ = first;
  const int64_t left = dataset_size_ - first;
  num_samples_ = options_.drop_last ? left / num_replicas_ : (left + num_replicas_ - 1) / num_replicas_;
  if (!options_.shuffle) return;
  const uint64_t key = options_.seed + uint64_t(epoch);  // PyTorch seeds its generator with seed + epoch
  if (options_.order == ShuffleOrder::Hashed) {
    hashed_.emplace(dataset_size_, key);
    return;
  }
  auto gen = at::make_generator<at::CPUGeneratorImpl>(key);
  const at::Tensor perm = at::randperm(dataset_size_, gen, at::kLong);
  const int64_t* order = perm.data_ptr<int64_t>();
  randperm_share_.resize(size_t(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) randperm_share_[size_t(i)] = order[position(i)];
}

int64_t DistributedSampler::position(int64_t i) const {
  return (first_ + rank_ + i * num_replicas_) % dataset_size_;  // past the end: padding repeats the head
}

int64_t DistributedSampler::index(int64_t i) const {
  if (i < 0 || i >= num_samples_)
    throw std::out_of_range("sampler: sample " + std::to_string(i) + " of a replica's " + std::to_string(num_samples_));
  if (!options_.shuffle) return position(i);
  if (options_.order == ShuffleOrder::Hashed) return (*hashed_)(position(i));
  return randperm_share_[size_t(i)];
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> mine(static_cast<size_t>(num_samples_));
  for (int64_t i = 0; i < num_samples_; ++i) mine[size_t(i)] = index(i);
  return mine;
}

}  // namespace dtrain
