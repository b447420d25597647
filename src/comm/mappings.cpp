#include "comm/mappings.h"

#include <ATen/WrapDimUtils.h>
#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "comm/collectives.h"

namespace dtrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The five things a mapping does in one direction; every mapping is a pair of them.
enum class Step { Identity, AllReduce, Gather, Split, ReduceScatter };

// One mapping applied to one tensor: what backward needs besides the gradient.
struct Mapping : torch::CustomClassHolder {
  std::shared_ptr<Group> group;
  std::string name;  // "copy_to_group": the public function, for labels and errors
  Step forward = Step::Identity, backward = Step::Identity;
  int64_t dim = -1;  // the dim Gather, Split and ReduceScatter work on, wrapped (never negative)
};

int64_t part_size(const Mapping& m, const at::Tensor& t) {
  const int n = m.group->size();
  if (t.size(m.dim) % n != 0)
    throw std::invalid_argument(m.name + " on group " + m.group->name() + ": dim " + std::to_string(m.dim) + " (size " +
                                std::to_string(t.size(m.dim)) + ") does not split into " + std::to_string(n) + " equal parts");
  return t.size(m.dim) / n;
}

// [..., S, ...] with every rank's part along m.dim, in group-rank order: all_gather concatenates along
// dim 0, so other dims are gathered as parts stacked on dim 0 and laid side by side.
at::Tensor gather_along(const Mapping& m, const at::Tensor& t, const std::string& label) {
  const at::Tensor stacked = all_gather(*m.group, t.contiguous(), label);
  return m.dim == 0 ? stacked : at::cat(stacked.chunk(m.group->size(), 0), m.dim);
}

// This rank's part of the sum over ranks: the parts along m.dim stacked on dim 0, which
// reduce_scatter splits.
at::Tensor reduce_scatter_along(const Mapping& m, const at::Tensor& t, const std::string& label) {
  part_size(m, t);
  const at::Tensor stacked = m.dim == 0 ? t.contiguous() : at::cat(t.chunk(m.group->size(), m.dim), 0);
  return reduce_scatter(*m.group, stacked, ReduceOp::Sum, label);
}

at::Tensor run(const Mapping& m, Step step, const at::Tensor& t, const char* direction) {
  const std::string label = m.name + " " + direction;
  switch (step) {
    case Step::Identity:
      return t;
    case Step::AllReduce: {
      at::Tensor sum = t.clone(at::MemoryFormat::Contiguous);  // the caller's tensor stays as it was
      all_reduce(*m.group, sum, ReduceOp::Sum, label);
      return sum;
    }
    case Step::Gather:
      return gather_along(m, t, label);
    case Step::Split: {
      const int64_t part = part_size(m, t);
      return t.narrow(m.dim, m.group->rank() * part, part).clone(at::MemoryFormat::Contiguous);
    }
    case Step::ReduceScatter:
      return reduce_scatter_along(m, t, label);
  }
  return t;
}

struct GroupMapping : torch::autograd::Function<GroupMapping> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::intrusive_ptr<Mapping> m) {
    at::Tensor y = run(*m, m->forward, x, "forward");
    ctx->saved_data["mapping"] = c10::IValue::make_capsule(std::move(m));
    return y;
  }

  // An output that did not reach the loss has a gradient of zeros here (autograd materializes it), so
  // every rank of the group still enters the collective.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto m = c10::static_intrusive_pointer_cast<Mapping>(ctx->saved_data["mapping"].toCapsule());
    return {run(*m, m->backward, grads[0], "backward"), at::Tensor()};
  }
};

at::Tensor map_over(const at::Tensor& x, const std::shared_ptr<Group>& group, const char* name, Step forward, Step backward,
                 int64_t dim = -1) {
  if (group->size() == 1) return x;
  auto m = c10::make_intrusive<Mapping>();
  m->group = group;
  m->name = name;
  m->forward = forward;
  m->backward = backward;
  if (forward != Step::Identity && forward != Step::AllReduce) {
    if (x.dim() == 0) throw std::invalid_argument(m->name + " on group " + group->name() + ": the tensor has no dims to split or gather");
    m->dim = at::maybe_wrap_dim(dim, x.dim());
  }
  return GroupMapping::apply(x, std::move(m));
}

}  // namespace

at::Tensor copy_to_group(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  return map_over(x, group, "copy_to_group", Step::Identity, Step::AllReduce);
}

at::Tensor reduce_from_group(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  return map_over(x, group, "reduce_from_group", Step::AllReduce, Step::Identity);
}

at::Tensor gather_from_group(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  return map_over(x, group, "gather_from_group", Step::Gather, Step::Split);
}

at::Tensor scatter_to_group(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  return map_over(x, group, "scatter_to_group", Step::Split, Step::Gather);
}

at::Tensor reduce_scatter_to_sequence(const at::Tensor& x, const std::shared_ptr<Group>& group, int64_t dim) {
  return map_over(x, group, "reduce_scatter_to_sequence", Step::ReduceScatter, Step::Gather, dim);
}

at::Tensor split_to_sequence(const at::Tensor& x, const std::shared_ptr<Group>& group, int64_t dim) {
  return map_over(x, group, "split_to_sequence", Step::Split, Step::Gather, dim);
}

at::Tensor gather_from_sequence(const at::Tensor& x, const std::shared_ptr<Group>& group, int64_t dim) {
  return map_over(x, group, "gather_from_sequence", Step::Gather, Step::ReduceScatter, dim);
}

}  // namespace dtrain
