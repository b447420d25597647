#include "train/step_executor.h"


namespace dtrain {

PassesResult AccumulationExecutor::run(std::optional<double> loss_scale) {
  if (!plan_.sharded) {  // stage 3 rounds each unit as it gathers it
    if (model_->precision().enabled()) plan_.optimizer->finish_parameter_updates();  // the working copies read every weight
    model_->refresh_working_copy();
  }
  BucketedGradSync& grad_sync = *plan_.grad_sync;
  grad_sync.zero_grad();
  PassesResult out;
  const double waited_before = plan_.model_parallel_waited_s();
  double loss_sum = 0;
  for (int64_t k = 0; k < accumulation_; ++k) {
    const bool sync = k + 1 == accumulation_ || grad_sync.reduces_every_micro_batch();
    grad_sync.set_sync(sync, k + 1 == accumulation_);
    if (sync) grad_sync.begin_backward();
    auto [x, y] = stream_.next();
    const nlohmann::json slice_args = {{"mb", k}, {"chunk", 0}};
    at::Tensor loss;
    {
      TraceSlice forward(trace_, "F", "compute", slice_args);
      loss = plan_.loss(model_->forward(x.to(device_)), y.to(device_));
    }
    {
      TraceSlice backward(trace_, "B", "compute", slice_args);
      (loss_scale ? loss * (*loss_scale / double(accumulation_)) : loss / double(accumulation_)).backward();
    }
    // 16-bit accumulation rounds the running sum after every micro-batch; the all-reduce rounds the last.
    if (round_ && !sync) plan_.flat->grad().copy_(plan_.flat->grad().to(*round_));
    if (sync) {
      grad_sync.finish_gradient_sync();
      out.comm_s += grad_sync.last_overlap().comm_s;
      out.hidden_s += grad_sync.last_overlap().hidden_s;
    }
    loss_sum += loss.item<double>();
  }
  out.loss = loss_sum / double(accumulation_);
  out.model_parallel_wait_s = plan_.model_parallel_waited_s() - waited_before;
  return out;
}

}  // namespace dtrain
