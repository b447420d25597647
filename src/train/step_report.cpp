#include "train/step_report.h"

#include <sys/resource.h>

#include "comm/collectives.h"
#include "common/number_text.h"
#include "model/mixed_precision.h"
#include "parallel/zero/reduce_scatter_grads.h"
#include "train/matmul_peak.h"

namespace dtrain {

void StepReport::measure_peak(World& world) {
  if (c_.peak_flops > 0) {
    peak_ = MfuPeak(c_.peak_flops * c_.world_size);
    return;
  }
  const auto& m = c_.model;
  const int64_t tokens = c_.micro_batch * m.seq_len / c_.parallel.cp;  // a cp rank computes its part of each sequence
  // The GEMMs the run calls: natively in 16 bits where the device has them, else on widened
  // operands in fp32 (model/mixed_precision.h).
  const MixedPrecision mp = MixedPrecision::make(c_.precision, world.device());
  auto peak = at::tensor({measure_matmul_flops(world.device(), tokens, m.d_model, m.ff_dim(), 1.5, mp.native_gemm ? mp.compute : at::kFloat)},
                         at::kDouble)
                  .to(world.device());
  all_reduce(*world.world_group(), peak, ReduceOp::Sum, "matmul_peak");
  peak_ = MfuPeak(peak.item<double>());
}

void StepReport::step(int64_t step, const StepOutcome& out, const ParallelPlan& plan) {
  comm_s_ += out.passes.comm_s;
  hidden_s_ += out.passes.hidden_s;
  if (step > 0 || c_.steps == 1) {  // the first step warms caches and allocators
    step_seconds_sum_ += out.step_s;
    ++steps_timed_;
  }
  if (!out.update.reason.empty()) log_.warn("step " + std::to_string(step + 1) + ": " + out.update.reason);
  if (out.update.overflow)
    log_.info("step " + std::to_string(step + 1) + ": fp16 gradients overflowed at loss scale " + plain(out.loss_scale) +
              "; step skipped, loss scale now " + plain(plan.scaler->scale()));
  const double tokens_per_s = double(c_.global_batch * c_.model.seq_len) / out.step_s;
  const double achieved = c_.model.train_flops_per_token() * tokens_per_s + out.image_flops / out.step_s;
  if (peak_.flops() > 0 && steps_timed_ > 0)
    if (const auto warning = peak_.observe(achieved)) log_.warn(*warning);
  const double mfu = peak_.flops() > 0 ? achieved / peak_.flops() : 0;
  if (metrics_) write_metrics(step, out, plan, tokens_per_s, achieved, mfu);
  const int64_t done = step + 1;
  if (done % c_.steps_per_print != 0 && done != c_.steps && step != 0) return;
  const double avg = steps_timed_ ? step_seconds_sum_ / double(steps_timed_) : out.step_s;
  std::string line = "step " + std::to_string(done) + "/" + std::to_string(c_.steps) + " | loss " + fixed(out.loss, 4) + " | lr " +
                     scientific(out.lr) + " | grad norm " + fixed(out.update.grad_norm, 3) + " | " + rate(tokens_per_s) + " tok/s | " +
                     fixed(achieved / 1e9, 1) + " GFLOP/s | MFU " + fixed(100 * mfu, 1) + "%";
  if (plan.scaler) line += " | loss scale " + plain(plan.scaler->scale());
  if (c_.dp > 1 && comm_s_ > 0) line += " | comm hidden " + fixed(100 * hidden_s_ / comm_s_, 0) + "%";
  line += " | ETA " + format_duration(avg * double(c_.steps - done));
  log_.info(line);
}

void StepReport::write_metrics(int64_t step, const StepOutcome& out, const ParallelPlan& plan, double tokens_per_s, double achieved,
                               double mfu) {
  nlohmann::json m = {{"step", step + 1},   {"loss", out.loss},       {"lr", out.lr},     {"grad_norm", out.update.grad_norm},
                      {"tokens_per_s", tokens_per_s}, {"step_s", out.step_s}, {"flops", achieved}, {"mfu", mfu}};
  if (out.update.overflow) m["skipped"] = "overflow";
  else if (out.update.verdict != StepVerdict::Apply) m["skipped"] = out.update.verdict == StepVerdict::SkipNonFinite ? "non_finite" : "spike";
  if (plan.scaler) m["loss_scale"] = out.loss_scale;
  if (c_.dp > 1) {
    m["comm_ms"] = out.passes.comm_s * 1e3;
    m["comm_hidden_ms"] = out.passes.hidden_s * 1e3;
  }
  // The time the step waited for tensor-parallel collectives: what of them no computation hid.
  if (!plan.model_parallel_groups.empty()) m["model_parallel_wait_ms"] = out.passes.model_parallel_wait_s * 1e3;
  if (c_.wall_clock_breakdown) {
    const auto& overlap = plan.grad_sync->last_overlap();
    m["first_bucket_launch_ms"] = overlap.first_launch_s * 1e3;
    m["last_grad_ms"] = overlap.last_grad_s * 1e3;
    m["backward_end_ms"] = overlap.backward_end_s * 1e3;
    m["grad_sync_wait_ms"] = overlap.wait_s * 1e3;
    if (plan.sharded) {
      m["unit_trace"] = nlohmann::json::array();
      for (const auto& e : plan.sharded->trace()) m["unit_trace"].push_back({e.what, e.index, e.ms});
      m["unit_gather_bytes"] = plan.sharded->gathered_bytes();
    }
    // What bounds the gradient path's transients at stages 2 and 3 (reduce_scatter_grads.h).
    if (const auto* sharded_grads = dynamic_cast<const ReduceScatterGrads*>(plan.grad_sync.get())) {
      m["largest_send_numel"] = sharded_grads->largest_send_numel();
      m["most_send_numel_in_flight"] = sharded_grads->most_send_numel_in_flight();
    }
    if (plan.parameter_gather) m["gather_waited_before_part"] = plan.parameter_gather->waited_before_part();
  }
  metrics_->write(m);
}

std::string StepReport::summary(int64_t steps, double elapsed, const ParallelPlan& plan, const StabilityGuard& guard, int64_t rollbacks,
                                int rank) const {
  struct rusage usage;
  ::getrusage(RUSAGE_SELF, &usage);
  std::string summary = "done: " + std::to_string(steps) + " steps in " + format_duration(elapsed) + ", " +
                        rate(double(steps * c_.global_batch * c_.model.seq_len) / elapsed) + " tok/s";
  if (c_.dp > 1 && comm_s_ > 0)
    summary += ", gradient reduction " + fixed(comm_s_, 2) + " s of which " + fixed(100 * hidden_s_ / comm_s_, 0) + "% hidden behind backward";
  if (plan.scaler && plan.scaler->skipped_steps())
    summary += ", " + std::to_string(plan.scaler->skipped_steps()) + " fp16 overflow step(s) skipped (loss scale now " +
               plain(plan.scaler->scale()) + ")";
  if (guard.skipped_non_finite() || guard.spikes())
    summary += ", " + std::to_string(guard.skipped_non_finite()) + " non-finite step(s) skipped, " + std::to_string(guard.spikes()) + " spike(s)";
  if (rollbacks) summary += ", " + std::to_string(rollbacks) + " rollback(s)";
  return summary + ", peak RSS " + std::to_string(usage.ru_maxrss / 1024) + " MiB, " + std::to_string(usage.ru_minflt) +
         " page faults (rank " + std::to_string(rank) + ")";
}

}  // namespace dtrain
