#include "data/distributed_sampler.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <numeric>
#include <stdexcept>
#include <string>

namespace dtrain {

DistributedSampler::DistributedSampler(int64_t dataset_size, int num_replicas, int rank, SamplerOptions options)
    : dataset_size_(dataset_size), num_replicas_(num_replicas), rank_(rank), options_(options) {
  if (num_replicas < 1 || rank < 0 || rank >= num_replicas)
    throw std::invalid_argument("sampler: rank " + std::to_string(rank) + " is not in [0, " + std::to_string(num_replicas) + ")");
  num_samples_ = options.drop_last ? dataset_size / num_replicas : (dataset_size + num_replicas - 1) / num_replicas;
  if (num_samples_ < 1)
    throw std::invalid_argument("sampler: " + std::to_string(dataset_size) + " samples cannot give each of " +
                                std::to_string(num_replicas) + " replicas one");
}

std::vector<int64_t> DistributedSampler::indices() const {
  std::vector<int64_t> order(dataset_size_);
  if (options_.shuffle) {
    auto gen = at::make_generator<at::CPUGeneratorImpl>(options_.seed + uint64_t(epoch_));
    auto perm = at::randperm(dataset_size_, gen, at::kLong);
    std::copy(perm.data_ptr<int64_t>(), perm.data_ptr<int64_t>() + dataset_size_, order.begin());
  } else {
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t total = num_samples_ * num_replicas_;
  for (int64_t i = dataset_size_; i < total; ++i) order.push_back(order[i % dataset_size_]);  // pad by repeating the head
  std::vector<int64_t> mine;
  mine.reserve(num_samples_);
  for (int64_t i = rank_; i < total; i += num_replicas_) mine.push_back(order[i]);
  return mine;
}

}  // namespace dtrain
