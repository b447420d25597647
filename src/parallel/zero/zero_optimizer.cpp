#include "parallel/zero/zero_optimizer.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

ZeroOptimizer::ZeroOptimizer(std::unique_ptr<ElementwiseOptimizer> inner, BucketShards shards, int stage,
                             std::shared_ptr<Group> group)
    : inner_(std::move(inner)), shards_(std::move(shards)), stage_(stage), group_(std::move(group)) {}

template <typename PieceOf>
void ZeroOptimizer::gather_into(PieceOf piece_of, at::Tensor& whole, const std::string& label) const {
  for (const auto& p : shards_.pieces()) {
    at::Tensor bucket = whole.narrow(0, p.bucket_offset, p.bucket_numel);
    // Straight into the buffer when the bucket divides evenly: no second copy.
    at::Tensor out = p.padded_numel == p.bucket_numel ? bucket : at::empty({p.padded_numel}, whole.options());
    all_gather(*group_, piece_of(p), out, label);
    if (!out.is_same(bucket)) bucket.copy_(out.narrow(0, 0, p.bucket_numel));
  }
}

void ZeroOptimizer::step(at::Tensor& params, const at::Tensor& grads, const Spans& decay, double lr) {
  at::NoGradGuard no_grad;
  if (stage_ == 3) {
    inner_->step(params, grads, decay, lr);
    return;
  }
  std::vector<StatePiece> mine;
  for (const auto& p : shards_.pieces()) {
    const int64_t g = stage_ == 1 ? p.begin : p.shard_offset;
    mine.push_back({params.narrow(0, p.begin, p.local), grads.narrow(0, g, p.local), spans_within(decay, p.begin, p.local),
                    p.shard_offset});
  }
  inner_->step_pieces(mine, lr);
  // The send buffer is a copy: the all-gather writes the region this rank's piece lives in.
  at::Tensor send = at::empty({0}, params.options());
  gather_into(
      [&](const ShardPiece& p) {
        send.resize_({p.piece});
        send.narrow(0, 0, p.local).copy_(params.narrow(0, p.begin, p.local));
        send.narrow(0, p.local, p.piece - p.local).zero_();
        return send;
      },
      params, "zero parameter all-gather");
}

std::map<std::string, at::Tensor> ZeroOptimizer::state() const {
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, t] : inner_->state()) {  // a std::map: every rank gathers in the same order
    if (!sharded(t)) {
      whole[name] = t;
      continue;
    }
    whole[name] = at::empty({shards_.numel()}, t.options());
    // The state's padding is never updated, so it is still zero.
    gather_into([&](const ShardPiece& p) { return t.narrow(0, p.shard_offset, p.piece); }, whole[name],
                "zero optimizer state '" + name + "'");
  }
  return whole;
}

std::map<std::string, at::Tensor> ZeroOptimizer::state_layout() const {
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, t] : inner_->state()) whole[name] = sharded(t) ? at::empty({shards_.numel()}, t.options()) : t;
  return whole;
}

void ZeroOptimizer::load_state(const std::map<std::string, at::Tensor>& state) {
  std::map<std::string, at::Tensor> mine;
  const auto local = inner_->state();
  for (const auto& [name, t] : state) {
    auto it = local.find(name);
    if (it == local.end() || !sharded(it->second) || t.dim() != 1 || t.numel() != shards_.numel()) {
      mine[name] = t;
      continue;
    }
    at::Tensor shard = at::zeros({shards_.shard_numel()}, t.options());
    for (const auto& p : shards_.pieces()) shard.narrow(0, p.shard_offset, p.local).copy_(t.narrow(0, p.begin, p.local));
    mine[name] = shard;
  }
  inner_->load_state(mine);
}

}  // namespace dtrain
