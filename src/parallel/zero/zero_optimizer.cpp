#include "parallel/zero/zero_optimizer.h"

#include <ATen/core/grad_mode.h>

namespace dtrain {

ZeroOptimizer::ZeroOptimizer(std::unique_ptr<FlatOptimizer> inner, FlatShard shard, std::shared_ptr<Group> group)
    : inner_(std::move(inner)), shard_(shard), group_(std::move(group)) {}

void ZeroOptimizer::gather_into(const at::Tensor& local, at::Tensor& whole, const std::string& label) const {
  at::Tensor send = at::empty({shard_.shard_len}, local.options());
  send.narrow(0, 0, shard_.local_len).copy_(local);
  send.narrow(0, shard_.local_len, shard_.shard_len - shard_.local_len).zero_();  // the padding, never read back
  // Straight into `whole` when no padding is needed: no second copy of the buffer.
  if (shard_.padded() == shard_.numel) return all_gather(*group_, send, whole, label);
  at::Tensor padded = at::empty({shard_.padded()}, local.options());
  all_gather(*group_, send, padded, label);
  whole.copy_(padded.narrow(0, 0, shard_.numel));
}

void ZeroOptimizer::step(at::Tensor& params, const at::Tensor& grads, const at::Tensor& decay_mask, double lr) {
  at::NoGradGuard no_grad;
  at::Tensor mine = params.narrow(0, shard_.begin, shard_.local_len);
  inner_->step(mine, grads.narrow(0, shard_.begin, shard_.local_len), decay_mask.narrow(0, shard_.begin, shard_.local_len), lr);
  gather_into(mine, params, "zero-1 parameter all-gather");
}

std::map<std::string, at::Tensor> ZeroOptimizer::state() const {
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, t] : inner_->state()) {  // a std::map: every rank gathers in the same order
    if (!sharded(t)) {
      whole[name] = t;
      continue;
    }
    whole[name] = at::empty({shard_.numel}, t.options());
    gather_into(t, whole[name], "zero-1 optimizer state '" + name + "'");
  }
  return whole;
}

std::map<std::string, at::Tensor> ZeroOptimizer::state_layout() const {
  std::map<std::string, at::Tensor> whole;
  for (const auto& [name, t] : inner_->state()) whole[name] = sharded(t) ? at::empty({shard_.numel}, t.options()) : t;
  return whole;
}

void ZeroOptimizer::load_state(const std::map<std::string, at::Tensor>& state) {
  std::map<std::string, at::Tensor> mine;
  const auto local = inner_->state();
  for (const auto& [name, t] : state) {
    auto it = local.find(name);
    const bool shard_it = it != local.end() && sharded(it->second) && t.dim() == 1 && t.numel() == shard_.numel;
    mine[name] = shard_it ? t.narrow(0, shard_.begin, shard_.local_len) : t;
  }
  inner_->load_state(mine);
}

}  // namespace dtrain
