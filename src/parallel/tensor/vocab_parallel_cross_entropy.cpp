#include "parallel/tensor/vocab_parallel_cross_entropy.h"

#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "comm/collectives.h"
#include "model/loss.h"

namespace dtrain {
namespace {

// A target that takes no loss (PyTorch's ignore_index, as next_token_loss leaves it out).
constexpr int64_t kIgnoredTarget = -100;

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct VocabParallelCrossEntropy : torch::autograd::Function<VocabParallelCrossEntropy> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& local_logits, const at::Tensor& targets,
                            int64_t vocab_begin, const std::shared_ptr<Group>& group) {
    const int64_t width = local_logits.size(-1);
    const at::Tensor logits = local_logits.reshape({-1, width}).to(at::kFloat);

    at::Tensor max = std::get<0>(logits.max(1));
    all_reduce(*group, max, ReduceOp::Max, "vocab_parallel_cross_entropy max");
    at::Tensor shifted = logits - max.unsqueeze(1);

    // The target's column here, for the tokens whose target this rank holds; column 0 stands in for
    // the others, whose target logit is then zeroed.
    const at::Tensor target = targets.reshape({-1});
    const at::Tensor held = (target >= vocab_begin).logical_and_(target < vocab_begin + width);
    const at::Tensor elsewhere = held.logical_not();
    const at::Tensor column = (target - vocab_begin).masked_fill_(elsewhere, 0);
    const at::Tensor target_logit = shifted.gather(1, column.unsqueeze(1)).squeeze(1).masked_fill_(elsewhere, 0);

    at::Tensor exp = shifted.exp_();
    // One all-reduce for both sums: row 0 the sum of exp, row 1 the target's shifted logit.
    at::Tensor sums = at::stack({exp.sum(1), target_logit});
    all_reduce(*group, sums, ReduceOp::Sum, "vocab_parallel_cross_entropy sum-exp and target logit");
    const at::Tensor sum_exp = sums[0];
    // The mean over the tokens that take a loss: the targets are the same on every rank.
    // The mean over the tokens that take a loss (the targets are the same on every rank), their
    // count kept on the device: reading it would wait for the GPU.
    const at::Tensor counted = target.ne(kIgnoredTarget).to(at::kFloat);
    const at::Tensor weight = counted / counted.sum();  // [tokens]: 1/N, or 0
    const at::Tensor loss = ((sum_exp.log() - sums[1]) * weight).sum();

    at::Tensor softmax = exp.div_(sum_exp.unsqueeze(1));
    ctx->save_for_backward({softmax, column, held, weight});
    ctx->saved_data["sizes"] = local_logits.sizes().vec();
    ctx->saved_data["dtype"] = static_cast<int64_t>(local_logits.scalar_type());
    return loss;
  }

  // d loss / d logit[t, v] = (softmax[t, v] - [v == target t]) / N for the N tokens counted, 0 for
  // the others, times the incoming gradient.
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &softmax = saved[0], &column = saved[1], &held = saved[2], &weight = saved[3];
    const at::Tensor scale = weight * grads[0].to(at::kFloat);  // [tokens]
    at::Tensor grad = softmax * scale.unsqueeze(1);
    grad.scatter_add_(1, column.unsqueeze(1), (held.to(at::kFloat) * -scale).unsqueeze(1));
    const auto dtype = static_cast<at::ScalarType>(ctx->saved_data["dtype"].toInt());
    return {grad.view(ctx->saved_data["sizes"].toIntVector()).to(dtype), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

void check_shapes(const at::Tensor& local_logits, const at::Tensor& targets, int64_t vocab_begin, const Group& group) {
  const std::string where = "vocab_parallel_cross_entropy on group " + group.name() + " (rank " + std::to_string(group.rank()) + ")";
  if (local_logits.dim() != 3 || local_logits.size(2) < 1 || !at::isFloatingType(local_logits.scalar_type()))
    throw std::invalid_argument(where + ": the local logits must be float [B, T, V_r >= 1], got " +
                                std::string(c10::toString(local_logits.scalar_type())) + " " + c10::str(local_logits.sizes()));
  if (targets.scalar_type() != at::kLong || targets.dim() != 2 || targets.size(0) != local_logits.size(0) ||
      targets.size(1) != local_logits.size(1))
    throw std::invalid_argument(where + ": targets must be int64 " + c10::str(local_logits.sizes().slice(0, 2)) + ", got " +
                                std::string(c10::toString(targets.scalar_type())) + " " + c10::str(targets.sizes()));
  if (vocab_begin < 0 || (group.size() == 1 && vocab_begin != 0))
    throw std::invalid_argument(where + ": vocab_begin " + std::to_string(vocab_begin) + " does not start a rank's columns");
}

}  // namespace

at::Tensor vocab_parallel_cross_entropy(const at::Tensor& local_logits, const at::Tensor& targets, int64_t vocab_begin,
                                        const std::shared_ptr<Group>& group) {
  check_shapes(local_logits, targets, vocab_begin, *group);
  if (group->size() == 1) return next_token_loss(local_logits, targets);
  return VocabParallelCrossEntropy::apply(local_logits, targets, vocab_begin, group);
}

}  // namespace dtrain
