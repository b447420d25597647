#include "optim/grad_clip.h"

#include <algorithm>
#include <cmath>

#include "comm/collectives.h"
#include "optim/fused_squares.h"

namespace dtrain {

namespace {

// The squares of elements [from, to), leaving out those of `excluded` (sorted, disjoint).
at::Tensor squares(const at::Tensor& grads, int64_t from, int64_t to, const Spans& excluded = {}) {
  at::Tensor sum = at::zeros({1}, grads.options().dtype(at::kDouble));
  int64_t next = from;
  // Squares summed in fp64: an fp32 norm of a whole buffer is off by ~1e-5 of itself at 10^5
  // elements (every layout's clipping factor would carry its own error). Contiguous fp32 on the CPU
  // takes one read pass (optim/fused_squares.h); elsewhere ATen's operations take a run of elements
  // at a time, since an fp64 copy of the whole buffer would cost twice its memory.
  const bool fused = grads.dim() == 1 && grads.is_cpu() && grads.scalar_type() == at::kFloat && grads.is_contiguous();
  constexpr int64_t kRun = int64_t(1) << 20;
  auto add = [&](int64_t a, int64_t b) {
    if (fused) {
      if (a < b) sum += fused_sum_of_squares(grads.const_data_ptr<float>() + a, b - a);
      return;
    }
    for (int64_t from = a; from < b; from += kRun)
      sum += grads.narrow(0, from, std::min(kRun, b - from)).to(at::kDouble).square().sum().reshape({1});
  };
  for (const Span& e : excluded) {
    if (e.offset + e.numel <= next) continue;
    if (e.offset >= to) break;
    add(next, e.offset);
    next = std::max(next, e.offset + e.numel);
  }
  add(next, to);
  return sum;
}

}  // namespace

double global_grad_norm(const at::Tensor& grads, Group* shard_group, const SplitElements& split, const StageElements& stages) {
  const Spans& left_out = stages.duplicated;
  at::Tensor sq;
  if (!split.group) {
    sq = squares(grads, 0, grads.numel(), left_out);
  } else {
    // The elements between the split spans are the same on every rank of the group, and so is what
    // is computed from them; the spans' squares are summed over it, the same on every rank too, so
    // every rank clips by the same factor and its replicated parameters stay equal.
    at::Tensor replicated = at::zeros({1}, grads.options().dtype(at::kDouble)), sliced = at::zeros_like(replicated);
    int64_t next = 0;
    for (const Span& s : split.spans) {
      if (s.offset > next) replicated += squares(grads, next, s.offset, left_out);
      sliced += squares(grads, s.offset, s.offset + s.numel, left_out);
      next = s.offset + s.numel;
    }
    if (next < grads.numel()) replicated += squares(grads, next, grads.numel(), left_out);
    all_reduce(*split.group, sliced, ReduceOp::Sum, "grad_norm over tensor-parallel slices");
    sq = replicated + sliced;
  }
  if (shard_group) all_reduce(*shard_group, sq, ReduceOp::Sum, "grad_norm");
  if (stages.group) all_reduce(*stages.group, sq, ReduceOp::Sum, "grad_norm over pipeline stages");
  return std::sqrt(sq.item<double>());
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

}  // namespace dtrain
