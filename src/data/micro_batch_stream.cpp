#include "data/micro_batch_stream.h"

#include <stdexcept>
#include <string>

namespace dtrain {

nlohmann::json to_json(const DataPosition& p) { return {{"epoch", p.epoch}, {"offset", p.offset}}; }

DataPosition data_position_from_json(const nlohmann::json& j) {
  return {j.at("epoch").get<int64_t>(), j.at("offset").get<int64_t>()};
}

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
      micro_batch_(micro_batch) {
  if (sampler_.num_samples() < micro_batch)
    throw std::invalid_argument("data: " + std::to_string(dataset_->size(Split::Train)) +
                                " training samples are too few for a micro-batch of " + std::to_string(micro_batch) +
                                " on each of " + std::to_string(num_replicas) + " ranks; use more data or a smaller batch");
  start_epoch(0);
}

void MicroBatchStream::start_epoch(int64_t epoch) {
  sampler_.set_epoch(epoch);
  epoch_indices_ = sampler_.indices();
  offset_ = 0;
}

std::pair<at::Tensor, at::Tensor> MicroBatchStream::next() {
  if (offset_ + micro_batch_ > int64_t(epoch_indices_.size())) start_epoch(sampler_.epoch() + 1);
  std::vector<int64_t> picked(epoch_indices_.begin() + offset_, epoch_indices_.begin() + offset_ + micro_batch_);
  offset_ += micro_batch_;
  return dataset_->batch(Split::Train, picked);
}

void MicroBatchStream::restore(const DataPosition& p) {
  start_epoch(p.epoch);
  if (p.offset < 0 || p.offset > int64_t(epoch_indices_.size()))
    throw std::invalid_argument("data position offset " + std::to_string(p.offset) + " is outside epoch " +
                                std::to_string(p.epoch) + " (" + std::to_string(epoch_indices_.size()) +
                                " samples per rank): the checkpoint was written for another data or batch layout");
  offset_ = p.offset;
}

}  // namespace dtrain
