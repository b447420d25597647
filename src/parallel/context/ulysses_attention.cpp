#include "parallel/context/ulysses_attention.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/custom_function.h>

#include <stdexcept>
#include <string>

#include "comm/collectives.h"
#include "parallel/context/attention_block.h"

namespace dtrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

enum class Shard { Sequence, Heads };

// n = group size. Sequence shards [B,H,T/n,hd] <-> head shards [B,H/n,T,hd]: the two are permutations
// of each other's elements across the group, so each is the other's adjoint.
at::Tensor reshard(Group& g, const at::Tensor& x, Shard to, const std::string& label) {
  const int64_t n = g.size(), b = x.size(0), h = x.size(1), t = x.size(2), hd = x.size(3);
  if (to == Shard::Heads) {
    // Part j of dim 0 goes to rank j: its heads; what arrives is stacked by source rank, whose tokens come j-th.
    const at::Tensor parts = x.view({b, n, h / n, t, hd}).transpose(0, 1).contiguous();
    return all_to_all(g, parts, label).permute({1, 2, 0, 3, 4}).reshape({b, h / n, n * t, hd});
  }
  const at::Tensor parts = x.view({b, h, n, t / n, hd}).permute({2, 0, 1, 3, 4}).contiguous();
  return all_to_all(g, parts, label).transpose(0, 1).reshape({b, n * h, t / n, hd});
}

struct Resharding : torch::CustomClassHolder {
  std::shared_ptr<Group> group;
  Shard to = Shard::Heads;
  std::string what;  // "q", "k", "v", "out": for labels
};

struct Reshard : torch::autograd::Function<Reshard> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, c10::intrusive_ptr<Resharding> r) {
    at::Tensor y = reshard(*r->group, x, r->to, "ulysses " + r->what + " forward");
    ctx->saved_data["resharding"] = c10::IValue::make_capsule(std::move(r));
    return y;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto r = c10::static_intrusive_pointer_cast<Resharding>(ctx->saved_data["resharding"].toCapsule());
    const Shard back = r->to == Shard::Heads ? Shard::Sequence : Shard::Heads;
    return {reshard(*r->group, grads[0].contiguous(), back, "ulysses " + r->what + " backward"), at::Tensor()};
  }
};

at::Tensor resharded(const at::Tensor& x, const std::shared_ptr<Group>& group, Shard to, const char* what) {
  auto r = c10::make_intrusive<Resharding>();
  r->group = group;
  r->to = to;
  r->what = what;
  return Reshard::apply(x.contiguous(), std::move(r));
}

// The device's fused kernel (attention_block.h) as a differentiable op: SDPA would fall back to the
// quadratic-memory math path on CUDA for fp32 grouped-query heads, where efficient attention has no
// grouped-query support.
struct FusedAttention : torch::autograd::Function<FusedAttention> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
    BlockAttention a = block_attention_forward(q, k, v, causal);
    ctx->save_for_backward({q, k, v, a.out, a.lse});
    ctx->saved_data["causal"] = causal;
    return a.out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list s = ctx->get_saved_variables();
    const BlockGradients g = block_attention_backward(grads[0].contiguous(), s[0], s[1], s[2], s[3], s[4],
                                                      ctx->saved_data["causal"].toBool());
    return {g.dq, g.dk, g.dv, at::Tensor()};
  }
};

void check_divisible(const at::Tensor& t, const char* key, int cp) {
  if (t.dim() != 4) throw std::invalid_argument("ulysses attention needs [B, heads, T, head_dim] tensors, got " + c10::str(t.sizes()));
  if (t.size(1) % cp != 0)
    throw std::invalid_argument(std::string(key) + " " + std::to_string(t.size(1)) + " is not divisible by parallel.cp " +
                                std::to_string(cp) + " (Ulysses gives each cp rank an equal share of the heads)");
}

}  // namespace

at::Tensor ulysses_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const std::shared_ptr<Group>& group,
                             bool causal) {
  const int cp = group->size();
  check_divisible(q, "model.n_head", cp);
  check_divisible(k, "model.n_kv_head", cp);
  if (cp == 1) return FusedAttention::apply(q, k, v, causal);
  const at::Tensor out = FusedAttention::apply(resharded(q, group, Shard::Heads, "q"), resharded(k, group, Shard::Heads, "k"),
                                               resharded(v, group, Shard::Heads, "v"), causal);
  return resharded(out, group, Shard::Sequence, "out");
}

}  // namespace dtrain
