#include "optim/grad_clip.h"

#include <algorithm>
#include <cmath>

#include "comm/collectives.h"
#include "optim/fused_squares.h"

namespace dtrain {

namespace {

// The squares of elements [from, to), leaving out those of `excluded` (sorted by offset; they may overlap).
at::Tensor squares(const at::Tensor& grads, int64_t from, int64_t to, const Spans& excluded = {}) {
  at::Tensor sum = at::zeros({1}, grads.options().dtype(at::kDouble));
  int64_t next = from;
  // Squares summed in fp64: an fp32 norm of a whole buffer summed in order is off by ~1e-5 of
  // itself at 10^5 elements (every layout's clipping factor would carry its own error). Contiguous
  // fp32 on the CPU takes one read pass (optim/fused_squares.h); other CPU buffers take ATen's
  // operations a run of 2^20 elements at a time (an fp64 copy of the whole would cost twice its
  // memory). On an accelerator each run of 2^24 elements is one norm kernel, which sums in fp32 in a
  // tree (an error of a few fp32 roundings) and copies nothing: the fp64 copy and squares of a run
  // were 16 B an element, the peak of a GPU step under full recomputation, and runs of 2^20 made the
  // norm of 300M parameters 870 launches.
  const bool fused = grads.dim() == 1 && grads.is_cpu() && grads.scalar_type() == at::kFloat && grads.is_contiguous();
  const int64_t run = int64_t(1) << (grads.is_cpu() ? 20 : 24);
  auto add = [&](int64_t a, int64_t b) {
    if (fused) {
      if (a < b) sum += fused_sum_of_squares(grads.const_data_ptr<float>() + a, b - a);
      return;
    }
    for (int64_t from = a; from < b; from += run) {
      const at::Tensor part = grads.narrow(0, from, std::min(run, b - from));
      sum += grads.is_cpu() ? part.to(at::kDouble).square().sum().reshape({1})
                            : at::linalg_vector_norm(part, 2, std::nullopt, false, at::kFloat).to(at::kDouble).square().reshape({1});
    }
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

// The squares of elements [from, to) outside `excluded`: {those outside `split`'s spans, those inside}.
std::pair<at::Tensor, at::Tensor> split_squares(const at::Tensor& grads, int64_t from, int64_t to, const Spans& split, const Spans& excluded) {
  at::Tensor replicated = at::zeros({1}, grads.options().dtype(at::kDouble)), sliced = at::zeros_like(replicated);
  int64_t next = from;
  for (const Span& s : split) {
    const int64_t begin = std::max(s.offset, from), end = std::min(s.offset + s.numel, to);
    if (begin >= end) continue;
    if (begin > next) replicated += squares(grads, next, begin, excluded);
    sliced += squares(grads, begin, end, excluded);
    next = end;
  }
  if (next < to) replicated += squares(grads, next, to, excluded);
  return {replicated, sliced};
}

// Both lists' spans in one sorted list.
Spans merged(const Spans& a, const Spans& b) {
  Spans out(a);
  out.insert(out.end(), b.begin(), b.end());
  std::sort(out.begin(), out.end(), [](const Span& x, const Span& y) { return x.offset < y.offset; });
  return out;
}

}  // namespace

double global_grad_norm(const at::Tensor& grads, Group* shard_group, const SplitElements& split, const StageElements& stages,
                        const Spans& whole) {
  const Spans& left_out = stages.duplicated;
  const Spans& kept_whole = shard_group ? whole : Spans{};
  // The elements between the split spans are the same on every rank of the group, and so is what
  // is computed from them; the spans' squares are summed over it, the same on every rank too, so
  // every rank clips by the same factor and its replicated parameters stay equal. The shard's own
  // elements and those kept whole are apart: only the first are summed over the shard group.
  auto [sharded, sliced] = split_squares(grads, 0, grads.numel(), split.spans, merged(left_out, kept_whole));
  at::Tensor whole_sq = at::zeros_like(sharded), whole_sliced = at::zeros_like(sharded);
  for (const Span& w : kept_whole) {
    auto [r, s] = split_squares(grads, w.offset, w.offset + w.numel, split.spans, left_out);
    whole_sq += r;
    whole_sliced += s;
  }
  if (split.group) {
    at::Tensor both = at::cat({sliced, whole_sliced});
    all_reduce(*split.group, both, ReduceOp::Sum, "grad_norm over tensor-parallel slices");
    sharded += both[0];
    whole_sq += both[1];
  } else {
    sharded += sliced;
    whole_sq += whole_sliced;
  }
  if (shard_group) all_reduce(*shard_group, sharded, ReduceOp::Sum, "grad_norm");
  at::Tensor sq = sharded + whole_sq;
  if (stages.group) all_reduce(*stages.group, sq, ReduceOp::Sum, "grad_norm over pipeline stages");
  return std::sqrt(sq.item<double>());
}

double clip_factor(double norm, double max_norm) {
  if (max_norm <= 0 || !(norm > max_norm)) return 1.0;
  return max_norm / (norm + 1e-6);
}

}  // namespace dtrain
