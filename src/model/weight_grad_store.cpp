#include "model/weight_grad_store.h"

#include <ATen/core/grad_mode.h>

#include <atomic>
#include <stdexcept>

namespace dtrain {

namespace {

std::atomic<WeightGradStore*> current_store{nullptr};

}  // namespace

void WeightGradStore::defer(const at::Tensor& weight, Compute compute) {
  TORCH_CHECK(weight.is_leaf(), "WeightGradStore: a deferred weight gradient must belong to a leaf parameter");
  pending_.push_back({weight, std::move(compute)});
}

void WeightGradStore::run() {
  at::NoGradGuard no_grad;
  std::vector<Pending> pending;
  pending.swap(pending_);
  for (Pending& p : pending) {
    at::Tensor grad = p.compute();
    at::Tensor& accumulated = p.weight.mutable_grad();
    if (accumulated.defined() && accumulated.is_sparse()) {
      // A table tied to a head is looked up with a sparse gradient (model/embedding.h), which arrives
      // first when the head's is deferred: the dense one takes it in, as autograd adds them undeferred.
      grad.add_(accumulated);
      accumulated = at::Tensor();
    }
    if (accumulated.defined()) {
      accumulated.add_(grad);
    } else if (grad.strides() == p.weight.strides()) {
      accumulated = std::move(grad);
    } else {  // autograd gives a new .grad() the parameter's layout, which flat views of it expect
      accumulated = at::empty_like(p.weight, p.weight.options().dtype(grad.scalar_type())).copy_(grad);
    }
    p.compute = nullptr;  // frees the activations it held as soon as it is done
  }
}

DeferWeightGrads::DeferWeightGrads(WeightGradStore& store) {
  WeightGradStore* none = nullptr;
  if (!current_store.compare_exchange_strong(none, &store))
    throw std::logic_error("DeferWeightGrads: a guard is already alive (they do not nest)");
}

DeferWeightGrads::~DeferWeightGrads() { current_store.store(nullptr); }

WeightGradStore* deferred_weight_grads() { return current_store.load(std::memory_order_relaxed); }

}  // namespace dtrain
