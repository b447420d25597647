#include "parallel/zero/host_offload_optimizer.h"

namespace dtrain {

at::TensorOptions host_staging_options(at::TensorOptions options, const at::Device& device) {
  return options.device(at::kCPU).pinned_memory(device.is_cuda());
}

HostOffloadOptimizer::HostOffloadOptimizer(std::unique_ptr<ElementwiseOptimizer> inner, int64_t numel, at::TensorOptions options,
                                           at::Device device, bool params_on_host)
    : inner_(std::move(inner)), params_on_host_(params_on_host) {
  const at::TensorOptions host = host_staging_options(options, device);
  grads_ = at::empty({numel}, host);
  if (!params_on_host_) params_ = at::empty({numel}, host);
}

void HostOffloadOptimizer::step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) {
  std::vector<StatePiece> host;
  // The copies in are queued on the compute stream and the last one blocks, which waits for all of
  // them: the update reads them next. The ones back out need not wait: they run on the compute
  // stream, before anything that reads the parameters and before the next step's copies in.
  std::vector<std::pair<at::Tensor, at::Tensor>> in;  // (host, device)
  for (const auto& p : pieces) {
    const int64_t n = p.params.numel();
    at::Tensor grads = grads_.narrow(0, p.state_offset, n);
    in.emplace_back(grads, p.grads);
    at::Tensor params = params_on_host_ ? p.params : params_.narrow(0, p.state_offset, n);
    if (!params_on_host_) in.emplace_back(params, p.params);
    host.push_back({params, grads, p.decay, p.state_offset});
  }
  for (size_t i = 0; i < in.size(); ++i) in[i].first.copy_(in[i].second, /*non_blocking=*/i + 1 < in.size());
  inner_->step_pieces(host, lr, {use.scale, false});  // the staging copy needs no zeroing; the gradients it came from do
  if (use.zero_after)
    for (const auto& p : pieces) p.grads.zero_();
  if (params_on_host_) return;
  for (size_t i = 0; i < pieces.size(); ++i) {
    at::Tensor out = pieces[i].params;
    out.copy_(host[i].params, /*non_blocking=*/true);
  }
}

int64_t HostOffloadOptimizer::host_bytes() const {
  return inner_->resident_bytes() + int64_t(grads_.nbytes()) + (params_.defined() ? int64_t(params_.nbytes()) : 0);
}

}  // namespace dtrain
