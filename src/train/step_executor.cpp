#include "train/step_executor.h"

#include "ckpt/crash_points.h"
#include "comm/collectives.h"
#include "parallel/placement.h"
#include "train/injected_faults.h"

namespace dtrain {

namespace {

// The images' pixels on `device`, for the vision encoder; their grids stay on the host, where the
// model reads them.
ImageBatch on_device(const ImageBatch& images, const at::Device& device) {
  ImageBatch out = images;
  if (out.patches.defined()) out.patches = out.patches.to(device, /*non_blocking=*/true);
  return out;
}

// What a batch's images cost the vision encoder and connector to train (none for a text model): the
// LLM's FLOPs per token cannot count them, since the config alone does not know the images' sizes.
// A frozen encoder (no vision.* parameter trains) runs forward only, a third of its training cost.
double image_train_flops(Transformer& model, const ImageBatch& images) {
  const TransformerConfig& m = model->config();
  if (!m.is_vlm() || !images.grids.defined() || images.grids.size(0) == 0) return 0;
  bool encoder_trains = false;
  for (const auto& p : model->named_parameters())
    encoder_trains = encoder_trains || (p.key().rfind("vision.", 0) == 0 && p.value().requires_grad());
  const at::Tensor grids = images.grids.to(at::kCPU, at::kLong).contiguous();
  const int64_t* g = grids.data_ptr<int64_t>();
  double flops = 0;
  for (int64_t i = 0; i < grids.size(0); ++i) {
    const double whole = m.vision.train_flops_per_image(g[2 * i], g[2 * i + 1], m.d_model);
    const double connector = m.vision.connector_train_flops_per_image(g[2 * i], g[2 * i + 1], m.d_model);
    flops += encoder_trains ? whole : connector + (whole - connector) / 3;
  }
  return flops;
}

}  // namespace

at::Tensor AccumulationExecutor::forward(const Batch& batch) { return model_->forward(batch.x.to(device_), on_device(batch.images, device_)); }

PassesResult AccumulationExecutor::run(int64_t step, std::optional<double> loss_scale) {
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
    const Batch batch = stream_.next();
    out.image_flops += image_train_flops(model_, batch.images);
    const nlohmann::json slice_args = {{"mb", k}, {"chunk", 0}};
    at::Tensor loss;
    {
      TraceSlice forward_slice(trace_, "F", "compute", slice_args);
      loss = plan_.loss(forward(batch), batch.y.to(device_));
    }
    if (k == 0) {
      crash_point("forward", step);
      if (crash_point_due("backward", step)) loss.register_hook([step](const at::Tensor&) { crash_point("backward", step); });
    }
    {
      TraceSlice backward(trace_, "B", "compute", slice_args);
      (loss_scale ? loss * (*loss_scale / double(accumulation_)) : loss / double(accumulation_)).backward();
    }
    // 16-bit accumulation rounds the running sum after every micro-batch; the all-reduce rounds the last.
    if (round_ && !sync) plan_.flat->grad().copy_(plan_.flat->grad().to(*round_));
    if (sync) {
      if (k + 1 == accumulation_) crash_point("collective", step);
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

double AccumulationExecutor::loss_of(const Batch& batch) { return plan_.loss(forward(batch), batch.y.to(device_)).item<double>(); }

PipelineExecutor::PipelineExecutor(Transformer& model, ParallelPlan& plan, MicroBatchStream& stream, at::Device device,
                                   std::vector<int64_t> boundary, ChromeTrace* trace)
    : model_(model), plan_(plan), stream_(stream), device_(device),
      runner_(model, *plan.pipeline, std::move(boundary), at::TensorOptions().dtype(at::kFloat).device(device), trace) {
  if (plan.pipeline->embedding)
    for (const auto& item : model->named_parameters())
      if (item.key() == "wte.weight") tied_weight_ = item.value();
  // With one chunk per rank, the last backward of 1f1b and gpipe runs through every parameter the
  // rank holds; zero_bubble's last action is a W, whose deferred gradients no autograd hook sees.
  const PipelineSchedule& schedule = plan.pipeline->schedule;
  reduce_in_cool_down_ = schedule.virtual_stages == 1 && schedule.kind != ScheduleKind::ZeroBubble &&
                         plan.grad_sync->shard_group() == nullptr && !plan.grad_sync->reduces_every_micro_batch();
}

double PipelineExecutor::over_pipeline(double last_stage_value) {
  at::Tensor t = at::tensor({last_stage_value}, at::kDouble).to(device_);
  all_reduce(*plan_.pipeline->pp, t, ReduceOp::Sum, "loss from the last stage");
  return t.item<double>();
}

PassesResult PipelineExecutor::run(int64_t step, std::optional<double> loss_scale) {
  if (plan_.sharded) {
    plan_.sharded->hold_whole();  // once per step: the schedule uses each part once per micro-batch, in its own order
  } else {
    if (model_->precision().enabled()) plan_.optimizer->finish_parameter_updates();
    model_->refresh_working_copy();
  }
  BucketedGradSync& grad_sync = *plan_.grad_sync;
  grad_sync.zero_grad();
  grad_sync.set_sync(false, false);
  const int m = plan_.pipeline->schedule.micro_batches;
  std::vector<MicroBatch> batches;
  for (int k = 0; k < m; ++k) batches.push_back(text_of(stream_.next()));
  PassesResult out;
  const double waited_before = plan_.model_parallel_waited_s();
  const double averaged_over = unaveraged_micro_batches_injected(step) ? 1.0 : double(m);
  std::vector<double> factors(size_t(m), (loss_scale ? *loss_scale : 1.0) / averaged_over);
  if (micro_batch_drop_injected(step)) factors.back() = 0;
  StepHooks hooks;
  hooks.after_first_compute = [step] { crash_point("pipeline", step); };
  auto start_reduction = [&grad_sync] {
    grad_sync.set_sync(true, true);
    grad_sync.begin_backward();
  };
  if (reduce_in_cool_down_) hooks.before_last_backward = start_reduction;
  const double loss_sum = runner_.train(batches, plan_.loss, factors, hooks);
  out.model_parallel_wait_s = plan_.model_parallel_waited_s() - waited_before;
  // Whole gradients reduced during the last backward are averaged over dp on both stages that hold
  // the tied embedding, and summed after; shards of it would lie at other places of the two stages'
  // shards, so they are summed before the reduction.
  if (!reduce_in_cool_down_) {
    sum_tied_embedding(step);
    start_reduction();
  }
  grad_sync.finish_gradient_sync();
  if (reduce_in_cool_down_) sum_tied_embedding(step);
  if (plan_.sharded) plan_.sharded->stop_holding();
  out.comm_s = grad_sync.last_overlap().comm_s;
  out.hidden_s = grad_sync.last_overlap().hidden_s;
  out.loss = over_pipeline(loss_sum) / double(m);
  return out;
}

void PipelineExecutor::sum_tied_embedding(int64_t step) {
  if (!tied_weight_.defined() || !tied_weight_.grad().defined() || tied_gradient_drop_injected(step)) return;
  at::Tensor grad = tied_weight_.grad();
  all_reduce(*plan_.pipeline->embedding, grad, ReduceOp::Sum, "tied embedding gradient");
}

MicroBatch PipelineExecutor::text_of(const Batch& batch) const {
  if (batch.images.count() > 0)
    throw std::invalid_argument("a batch with " + std::to_string(batch.images.count()) +
                                " image(s) for a pipeline: pipeline parallelism (parallel.pp) runs text models only");
  return {batch.x.to(device_), batch.y.to(device_)};
}

double PipelineExecutor::loss_of(const Batch& batch) { return over_pipeline(runner_.evaluate(text_of(batch), plan_.loss)); }

std::unique_ptr<StepExecutor> make_step_executor(Transformer& model, ParallelPlan& plan, MicroBatchStream& stream, const TrainConfig& config,
                                                 at::Device device, ChromeTrace* trace) {
  if (plan.pipeline) {
    // A resume at another dp may have changed the number of micro-batches, to keep the global batch.
    PipelineSchedule& schedule = plan.pipeline->schedule;
    if (schedule.micro_batches != config.accumulation) {
      try {
        schedule = make_schedule(schedule.kind, schedule.pp, schedule.virtual_stages, int(config.accumulation));
      } catch (const std::invalid_argument& e) {
        throw ConfigError("resuming keeps the checkpoint's global batch with " + std::to_string(config.accumulation) +
                          " micro-batches per step, which the pipeline cannot run: " + e.what() +
                          "; set train_batch_size so that gradient_accumulation_steps suits parallel.pipeline.schedule");
      }
    }
    // The stages hand on this cp rank's part of the sequence, and under sequence parallelism this tp
    // rank's part of that.
    const DeviceMesh& mesh = *plan.mesh;
    const int64_t tokens = config.model.seq_len / mesh.size("cp");
    const auto [first, end] = config.sequence_parallel ? chunk_range(tokens, mesh.coord("tp"), mesh.size("tp"))
                                                       : std::pair<int64_t, int64_t>{0, tokens};
    return std::make_unique<PipelineExecutor>(model, plan, stream, device, std::vector<int64_t>{config.micro_batch, end - first, config.model.d_model},
                                              trace);
  }
  const auto round = config.grad_accum_16bit ? std::optional<at::ScalarType>(config.precision) : std::nullopt;
  return std::make_unique<AccumulationExecutor>(model, plan, stream, config.accumulation, device, round, trace);
}

}  // namespace dtrain
