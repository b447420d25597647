#include "data/micro_batch_stream.h"

#include <stdexcept>
#include <string>

namespace dtrain {

nlohmann::json to_json(const DataPosition& p) { return {{"epoch", p.epoch}, {"samples", p.samples}}; }

namespace {
SamplerOptions without_tail(SamplerOptions o) {
  o.drop_last = true;
  return o;
}
}  // namespace

MicroBatchStream::MicroBatchStream(std::shared_ptr<const TokenDataset> dataset, int num_replicas, int rank,
                                   int micro_batch, SamplerOptions options)
    : dataset_(std::move(dataset)),
      sampler_(dataset_->size(Split::Train), num_replicas, rank, without_tail(options)),
      num_replicas_(num_replicas),
      micro_batch_(micro_batch) {
  if (sampler_.num_samples() < micro_batch)
    throw std::invalid_argument("data: " + std::to_string(dataset_->size(Split::Train)) +
                                " training samples are too few for a micro-batch of " + std::to_string(micro_batch) +
                                " on each of " + std::to_string(num_replicas) + " ranks; use more data or a smaller batch");
}

void MicroBatchStream::start_epoch(int64_t epoch) {
  sampler_.set_epoch(epoch);
  offset_ = 0;
}

std::pair<at::Tensor, at::Tensor> MicroBatchStream::next() {
  if (offset_ + micro_batch_ > sampler_.num_samples()) start_epoch(sampler_.epoch() + 1);
  std::vector<int64_t> picked(static_cast<size_t>(micro_batch_));
  for (auto& sample : picked) sample = sampler_.index(offset_++);
  return dataset_->batch(Split::Train, picked);
}

void MicroBatchStream::restore(const DataPosition& p) {
  const int64_t epoch_samples = sampler_.num_samples() * num_replicas_;
  if (p.samples < 0 || p.samples > epoch_samples)
    throw std::invalid_argument("data position " + std::to_string(p.samples) + " is outside epoch " + std::to_string(p.epoch) +
                                " (" + std::to_string(epoch_samples) +
                                " samples over all ranks): the checkpoint was written for other data or another sequence length");
  if (p.samples % num_replicas_ != 0)
    throw std::invalid_argument("data position " + std::to_string(p.samples) + " does not divide among " +
                                std::to_string(num_replicas_) + " data-parallel ranks: the checkpoint was written with a global "
                                "batch that " + std::to_string(num_replicas_) + " ranks cannot share");
  start_epoch(p.epoch);
  offset_ = p.samples / num_replicas_;
}

}  // namespace dtrain
