#include "parallel/zero/parameter_all_gather.h"

#include <ATen/core/grad_mode.h>


namespace dtrain {

ParameterAllGather::ParameterAllGather(BucketShards shards, std::shared_ptr<Group> group, const std::vector<FlatEntry>& entries,
                                       const ParameterParts& parts)
    : shards_(std::move(shards)), group_(std::move(group)), first_bucket_of_part_(size_t(parts.end()), -1) {
  const auto& pieces = shards_.pieces();
  for (const FlatEntry& e : entries) {
    const int part = parts.of(e.name);
    for (int b = 0; b < int(pieces.size()); ++b) {
      const ShardPiece& p = pieces[size_t(b)];
      if (e.offset >= p.bucket_offset + p.bucket_numel || e.offset + e.numel <= p.bucket_offset) continue;
      int& first = first_bucket_of_part_[size_t(part)];
      if (first < 0 || b < first) first = b;
    }
  }
  waited_before_part_.assign(pieces.size(), -1);
}

ParameterAllGather::~ParameterAllGather() {
  try {
    finish();
  } catch (const std::exception&) {
    // A peer that is gone: the run is ending with its own error.
  }
}

void ParameterAllGather::launch(at::Tensor& params) {
  TORCH_CHECK(pending_.empty(), "ParameterAllGather::launch: the last step's gathers are still running (finish() them first)");
  at::NoGradGuard no_grad;
  params_ = params;
  const auto& pieces = shards_.pieces();
  for (int b = int(pieces.size()) - 1; b >= 0; --b) {
    const ShardPiece& p = pieces[size_t(b)];
    if (p.whole) continue;  // every rank updated all of it
    // A copy to send: the all-gather writes the region this rank's piece lives in.
    at::Tensor send = at::empty({p.piece}, params.options());
    send.narrow(0, 0, p.local).copy_(params.narrow(0, p.begin, p.local));
    send.narrow(0, p.local, p.piece - p.local).zero_();
    at::Tensor bucket = params.narrow(0, p.bucket_offset, p.bucket_numel);
    // Straight into the buffer when the bucket divides evenly: no second copy.
    at::Tensor out = p.padded_numel == p.bucket_numel ? bucket : at::empty({p.padded_numel}, params.options());
    CommHandle handle = all_gather_async(*group_, send, out, "zero parameter all-gather bucket " + std::to_string(b));
    pending_.push_back({b, std::move(handle), send, out});
  }
}

void ParameterAllGather::wait_through(int bucket, int part) {
  at::NoGradGuard no_grad;
  size_t done = 0;
  for (; done < pending_.size(); ++done) {
    Pending& g = pending_[done];
    if (g.bucket < bucket) break;
    g.handle.wait();
    const ShardPiece& p = shards_.pieces()[size_t(g.bucket)];
    at::Tensor region = params_.narrow(0, p.bucket_offset, p.bucket_numel);
    if (!g.out.is_same(region)) region.copy_(g.out.narrow(0, 0, p.bucket_numel));
    waited_before_part_[size_t(g.bucket)] = part;
  }
  pending_.erase(pending_.begin(), pending_.begin() + long(done));
}

void ParameterAllGather::finish() { wait_through(0, -1); }

void ParameterAllGather::before_part(int part) {
  if (part >= 0 && part < int(first_bucket_of_part_.size()) && first_bucket_of_part_[size_t(part)] >= 0)
    wait_through(first_bucket_of_part_[size_t(part)], part);
}

}  // namespace dtrain
