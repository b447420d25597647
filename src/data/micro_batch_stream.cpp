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

MicroBatchStream::MicroBatchStream(std::shared_ptr<const SampleDataset> dataset, int num_replicas, int rank,
                                   int micro_batch, int64_t micro_batches_per_step, SamplerOptions options)
    : dataset_(std::move(dataset)),
      sampler_(dataset_->size(Split::Train), num_replicas, rank, without_tail(options)),
      num_replicas_(num_replicas),
      micro_batch_(micro_batch),
      sample_log_(SampleLog::from_env()) {
  set_micro_batches_per_step(micro_batches_per_step);
}

void MicroBatchStream::set_micro_batches_per_step(int64_t n) {
  per_step_ = n;
  if (step_samples() > dataset_->size(Split::Train))
    throw std::invalid_argument("data: " + std::to_string(dataset_->size(Split::Train)) + " training samples are too few for a global batch of " +
                                std::to_string(step_samples()) + " (micro-batch " + std::to_string(micro_batch_) + " x " +
                                std::to_string(n) + " x " + std::to_string(num_replicas_) + " ranks); use more data or a smaller batch");
}

void MicroBatchStream::start_epoch(int64_t epoch, int64_t first) {
  sampler_.set_epoch(epoch, first);
  first_ = first;
  offset_ = 0;
  drawn_ = 0;
}

Batch MicroBatchStream::next() {
  if (drawn_ == 0 && position().samples + step_samples() > dataset_->size(Split::Train)) start_epoch(sampler_.epoch() + 1, 0);
  std::vector<int64_t> picked(static_cast<size_t>(micro_batch_));
  for (auto& sample : picked) sample = sampler_.index(offset_++);
  drawn_ = (drawn_ + 1) % per_step_;
  if (sample_log_) sample_log_->write(sampler_.epoch(), picked);
  return dataset_->batch(Split::Train, picked);
}

void MicroBatchStream::restore(const DataPosition& p) {
  const int64_t epoch_samples = dataset_->size(Split::Train);
  if (p.samples < 0 || p.samples > epoch_samples)
    throw std::invalid_argument("data position " + std::to_string(p.samples) + " is outside epoch " + std::to_string(p.epoch) +
                                " (" + std::to_string(epoch_samples) +
                                " samples): the checkpoint was written for other data or another sequence length");
  start_epoch(p.epoch, p.samples);
}

}  // namespace dtrain
