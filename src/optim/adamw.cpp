#include "optim/adamw.h"

#include <ATen/core/grad_mode.h>

#include <algorithm>
#include <cmath>

#include "optim/fused_adamw.h"

namespace dtrain {

namespace {
// The denominator is formed a chunk at a time: a scratch the size of the model would cost as much
// memory as one of the moments, and one allocated afresh every step costs page faults. A chunk of
// 4 MiB (fp32) keeps the per-chunk overhead negligible.
constexpr int64_t kDenomChunk = 1 << 20;

// Contiguous fp32: what the fused pass (on the CPU) and the multi-tensor kernel (elsewhere) run on.
// Anything else (another dtype, a strided view) takes ATen's operations, which run on every device.
bool contiguous_fp32(const at::Tensor& t) { return t.scalar_type() == at::kFloat && t.is_contiguous(); }

bool fusable(std::initializer_list<at::Tensor> tensors) {
  for (const auto& t : tensors)
    if (!t.is_cpu() || !contiguous_fp32(t)) return false;
  return true;
}

bool multi_tensor(const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state) {
  if (pieces.empty() || pieces[0].params.is_cpu()) return false;
  const at::Device device = pieces[0].params.device();
  for (const at::Tensor& t : state)
    if (t.device() != device || !contiguous_fp32(t)) return false;
  for (const StatePiece& p : pieces)
    if (p.params.device() != device || p.grads.device() != device || !contiguous_fp32(p.params) || !contiguous_fp32(p.grads)) return false;
  return true;
}

// The spans of [0, n) outside `decay` (sorted, disjoint).
Spans undecayed(const Spans& decay, int64_t n) {
  Spans out;
  int64_t next = 0;
  for (const Span& s : decay) {
    if (s.offset > next) out.push_back({next, s.offset - next});
    next = std::max(next, s.offset + s.numel);
  }
  if (next < n) out.push_back({next, n - next});
  return out;
}
}  // namespace

void adamw_multi_tensor(const AdamWOptions& options, const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state,
                        int64_t step, double lr, const GradUse& use) {
  at::NoGradGuard no_grad;
  std::vector<at::Tensor> params[2], grads[2], m[2], v[2];  // [0]: decayed, [1]: not
  for (const StatePiece& p : pieces) {
    const int64_t n = p.params.numel();
    if (use.scale != 1) p.grads.mul_(use.scale);
    const Spans groups[2] = {options.weight_decay != 0 ? p.decay : Spans{}, options.weight_decay != 0 ? undecayed(p.decay, n) : Spans{{0, n}}};
    for (int g = 0; g < 2; ++g)
      for (const Span& s : groups[g]) {
        if (s.numel == 0) continue;
        params[g].push_back(p.params.narrow(0, s.offset, s.numel));
        grads[g].push_back(p.grads.narrow(0, s.offset, s.numel));
        m[g].push_back(state[0].narrow(0, p.state_offset + s.offset, s.numel));
        v[g].push_back(state[1].narrow(0, p.state_offset + s.offset, s.numel));
      }
  }
  for (int g = 0; g < 2; ++g) {
    if (params[g].empty()) continue;
    // The kernel reads the bias corrections' step from a tensor per parameter; one serves them all.
    const at::Tensor count = at::full({}, double(step), params[g][0].options());
    const std::vector<at::Tensor> steps(params[g].size(), count);
    at::_fused_adamw_(params[g], grads[g], m[g], v[g], {}, steps, lr, options.beta1, options.beta2, g == 0 ? options.weight_decay : 0.0,
                      options.eps, /*amsgrad=*/false, /*maximize=*/false);
  }
  if (use.zero_after)
    for (const StatePiece& p : pieces) p.grads.zero_();
}

void AdamW::update(const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state, int64_t step, double lr,
                   const GradUse& use) {
  if (multi_tensor(pieces, state)) return adamw_multi_tensor(options_, pieces, state, step, lr, use);
  at::NoGradGuard no_grad;
  const double bias1 = 1 - std::pow(options_.beta1, double(step));
  const double bias2 = 1 - std::pow(options_.beta2, double(step));
  for (const auto& p : pieces) {
    at::Tensor params = p.params;
    const int64_t n = params.numel();
    at::Tensor m = state[0].narrow(0, p.state_offset, n), v = state[1].narrow(0, p.state_offset, n);
    if (fusable({params, p.grads, m, v})) {
      update_fused(params, p.grads, m, v, p.decay, bias1, bias2, lr, use);
      continue;
    }
    if (use.scale != 1) p.grads.mul_(use.scale);
    if (!denom_.defined() || denom_.numel() < std::min(n, kDenomChunk)) denom_ = at::empty({std::min(n, kDenomChunk)}, params.options());
    if (options_.weight_decay != 0)
      for (const Span& s : p.decay) {
        at::Tensor decayed = params.narrow(0, s.offset, s.numel);
        decayed.add_(decayed, -lr * options_.weight_decay);
      }
    m.lerp_(p.grads, 1 - options_.beta1);
    v.mul_(options_.beta2).addcmul_(p.grads, p.grads, 1 - options_.beta2);
    for (int64_t from = 0; from < n; from += denom_.numel()) {
      const int64_t len = std::min(denom_.numel(), n - from);
      at::Tensor denom = denom_.narrow(0, 0, len);
      at::sqrt_out(denom, v.narrow(0, from, len)).mul_(1.0 / std::sqrt(bias2)).add_(options_.eps);
      params.narrow(0, from, len).addcdiv_(m.narrow(0, from, len), denom, -lr / bias1);
    }
    if (use.zero_after) p.grads.zero_();
  }
}

// One fused pass over the piece, weight decay where its spans say, each gradient scaled (and zeroed) as it is read.
void AdamW::update_fused(at::Tensor& params, const at::Tensor& grads, at::Tensor& m, at::Tensor& v, const Spans& decay, double bias1,
                         double bias2, double lr, const GradUse& use) {
  const AdamWStep s{float(-lr * options_.weight_decay),
              float(1 - options_.beta1),
              float(options_.beta2),
              float(1 - options_.beta2),
              float(1 / std::sqrt(bias2)),
              float(options_.eps),
              float(-lr / bias1),
              float(use.scale)};
  fused_adamw(params.data_ptr<float>(), grads.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(), params.numel(), decay, s,
              use.zero_after);
}

}  // namespace dtrain
