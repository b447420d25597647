// Global gradient-norm clipping (`gradient_clipping`), as torch.nn.utils.clip_grad_norm_.
#pragma once
#include <ATen/ATen.h>

#include "optim/decay_spans.h"

namespace dtrain {

class Group;

// Elements of a rank's gradients of which the ranks of `group` each hold a different part (slices of
// a tensor-parallel layer), while every other element is the same on all of them.
struct SplitElements {
  Spans spans;  // sorted, disjoint
  Group* group = nullptr;
};

// Pipeline stages: each holds other parameters, so the squares are summed over `group` (pp); the
// `duplicated` elements are a copy another stage counts (a tied embedding's second copy), left out.
struct StageElements {
  Spans duplicated;  // sorted, disjoint
  Group* group = nullptr;
};

// The L2 norm of all gradients, each element counted once. `grads` may be this rank's shard of them:
// with a `shard_group` the squared norms are summed across it, so every rank gets the norm of the
// whole model, but for the `whole` elements (sorted, disjoint), which every rank of it holds the same
// copy of (a bucket ZeRO keeps whole), counted once; the squares of `split` elements are summed
// across its group first.
double global_grad_norm(const at::Tensor& grads, Group* shard_group = nullptr, const SplitElements& split = {}, const StageElements& stages = {},
                        const Spans& whole = {});

// The factor clipping scales the gradients by: max_norm / (norm + 1e-6) when norm exceeds max_norm
// (> 0), else 1. The optimizer applies it as it reads them (GradUse::scale).
double clip_factor(double norm, double max_norm);

}  // namespace dtrain
