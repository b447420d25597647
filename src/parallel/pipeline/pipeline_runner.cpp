#include "parallel/pipeline/pipeline_runner.h"

#include <torch/csrc/autograd/autograd.h>

#include <string>

namespace dtrain {

namespace {

using Kind = PipelineAction::Kind;

std::string what(const char* kind, int mb, int chunk) {
  return std::string(kind) + " of micro-batch " + std::to_string(mb) + ", chunk " + std::to_string(chunk);
}

}  // namespace

PipelineRunner::PipelineRunner(Transformer& model, const PipelineStages& stages, std::vector<int64_t> boundary, at::TensorOptions options,
                               ChromeTrace* trace)
    : model_(model), stages_(stages), boundary_(std::move(boundary)), options_(options), me_(stages.coord()),
      last_(int(stages.chunks.size()) - 1), delivered_by_(sends_delivered_by(stages.schedule, me_)), trace_(trace) {}

void PipelineRunner::post_receive(const PipelineAction& a) {
  if (a.kind != Kind::RecvActivation && a.kind != Kind::RecvGradient) return;
  at::Tensor buffer = at::empty(boundary_, options_);
  const std::string label = what(a.kind == Kind::RecvActivation ? "activation" : "gradient", a.micro_batch, a.chunk);
  receives_[{int(a.kind), {a.micro_batch, a.chunk}}] = {buffer, recv_async(*stages_.pp, buffer, a.peer, label)};
}

void PipelineRunner::arrived(Kind kind, int mb, int chunk) {
  if (auto it = receives_.find({int(kind), {mb, chunk}}); it != receives_.end()) it->second.second.wait();
}

at::Tensor PipelineRunner::received(Kind kind, int mb, int chunk) {
  auto it = receives_.find({int(kind), {mb, chunk}});
  TORCH_CHECK(it != receives_.end(), "pipeline stage ", me_, ": the schedule receives no ", kind == Kind::RecvActivation ? "activation" : "gradient",
              " for micro-batch ", mb, ", chunk ", chunk);
  it->second.second.wait();
  at::Tensor out = it->second.first;
  receives_.erase(it);
  return out;
}

at::Tensor PipelineRunner::chunk_input(const std::vector<MicroBatch>& batches, int mb, int chunk) {
  if (chunk == 0) return batches[size_t(mb)].input;
  // A chunk's input needs its gradient, which goes back to the chunk before it.
  at::Tensor in = local(chunk - 1) ? slots_.at({mb, chunk - 1}).output.detach() : received(Kind::RecvActivation, mb, chunk);
  return in.requires_grad_();
}

void PipelineRunner::forward(const std::vector<MicroBatch>& batches, const LossFunction& loss, int mb, int chunk, at::Tensor& loss_sum) {
  Slot& s = slots_[{mb, chunk}];
  at::Tensor in = chunk_input(batches, mb, chunk);
  if (chunk > 0) s.input = in;
  at::Tensor out = model_->forward_chunk(stages_.local_index(chunk), in);
  if (chunk == last_) {
    out = loss(out, batches[size_t(mb)].target);
    loss_sum += out.detach().to(at::kDouble);  // read once, after the step: a read here would wait for the device
  } else {
    TORCH_CHECK(out.sizes() == at::IntArrayRef(boundary_) && out.scalar_type() == options_.dtype(), "pipeline stage ", me_, ": chunk ",
                chunk, " handed on ", out.scalar_type(), " ", out.sizes(), " where the boundary is ", options_.dtype(), " ",
                at::IntArrayRef(boundary_));
  }
  s.output = out;
}

void PipelineRunner::backward(int mb, int chunk, double loss_factor) {
  Slot& s = slots_.at({mb, chunk});
  if (chunk == last_) {
    (s.output * loss_factor).backward();
  } else {
    at::Tensor grad = local(chunk + 1) ? slots_.at({mb, chunk + 1}).input.grad() : received(Kind::RecvGradient, mb, chunk);
    // The first chunk frozen whole behind frozen embeddings recorded no graph (and let its sent
    // output go): nothing to differentiate. Every later chunk's input requires its gradient.
    if (s.output.defined() && s.output.requires_grad()) torch::autograd::backward({s.output}, {grad});
    if (local(chunk + 1)) slots_.erase({mb, chunk + 1});
  }
  s.output = at::Tensor();  // its graph is spent; the input's gradient waits for its send
}

void PipelineRunner::send(size_t i, const at::Tensor& t, int peer, const std::string& label) {
  at::Tensor payload = t.detach().contiguous();
  sends_[i] = {payload, send_async(*stages_.pp, payload, peer, label)};
}

void PipelineRunner::release_sends(size_t i) {
  for (auto it = sends_.begin(); it != sends_.end();) {
    if (delivered_by_[it->first] != i) {
      ++it;
      continue;
    }
    it->second.second.wait();  // done already: the message just read was sent after the peer read this one
    it = sends_.erase(it);
  }
}

void PipelineRunner::compute(size_t i, const std::vector<MicroBatch>& batches, const LossFunction& loss,
                             const std::vector<double>& loss_factors, at::Tensor& loss_sum) {
  const PipelineAction& a = stages_.schedule.actions[size_t(me_)][i];
  const double loss_factor = loss_factors[size_t(a.micro_batch)];
  // What the action receives is waited for first, so that its slice in the trace is its compute alone.
  if (a.kind == Kind::Forward) arrived(Kind::RecvActivation, a.micro_batch, a.chunk);
  if (a.kind == Kind::Backward || a.kind == Kind::BackwardInput) arrived(Kind::RecvGradient, a.micro_batch, a.chunk);
  release_sends(i);
  TraceSlice slice(trace_, action_kind_name(a.kind), "compute", {{"mb", a.micro_batch}, {"chunk", a.chunk}});
  const Key key{a.micro_batch, a.chunk};
  switch (a.kind) {
    case Kind::Forward:
      if (stages_.schedule.kind == ScheduleKind::ZeroBubble) {  // some devices' layers must know in forward that W comes apart
        DeferWeightGrads defer(deferred_[key]);
        forward(batches, loss, a.micro_batch, a.chunk, loss_sum);
      } else {
        forward(batches, loss, a.micro_batch, a.chunk, loss_sum);
      }
      break;
    case Kind::Backward:
      backward(a.micro_batch, a.chunk, loss_factor);
      break;
    case Kind::BackwardInput: {
      DeferWeightGrads defer(deferred_[key]);
      backward(a.micro_batch, a.chunk, loss_factor);
      break;
    }
    case Kind::BackwardWeight:
      deferred_.at(key).run();
      deferred_.erase(key);
      break;
    default:
      break;
  }
}

double PipelineRunner::train(const std::vector<MicroBatch>& batches, const LossFunction& loss, const std::vector<double>& loss_factors,
                             const StepHooks& hooks) {
  TORCH_CHECK(int(batches.size()) == stages_.schedule.micro_batches, "the pipeline schedule runs ", stages_.schedule.micro_batches,
              " micro-batches per step, given ", batches.size());
  const std::vector<PipelineAction>& actions = stages_.schedule.actions[size_t(me_)];
  const PipelineAction* last_compute = nullptr;
  for (const PipelineAction& a : actions)
    if (a.is_compute()) last_compute = &a;
  at::Tensor loss_sum = at::zeros({}, options_.dtype(at::kDouble));
  bool first = true;
  size_t posted = 0;  // actions[0, posted) have had their receives posted
  for (size_t i = 0; i < actions.size(); ++i) {
    const PipelineAction& a = actions[i];
    for (const size_t through = receives_posted_through(actions, i); posted < through; ++posted) post_receive(actions[posted]);
    if (a.is_compute()) {
      if (&a == last_compute && a.kind == Kind::Backward && hooks.before_last_backward) hooks.before_last_backward();
      compute(i, batches, loss, loss_factors, loss_sum);
      if (first && hooks.after_first_compute) hooks.after_first_compute();
      first = false;
      continue;
    }
    switch (a.kind) {
      case Kind::SendActivation: {
        at::Tensor& output = slots_.at({a.micro_batch, a.chunk}).output;
        send(i, output, a.peer, what("activation", a.micro_batch, a.chunk + 1));
        if (!output.requires_grad()) output = at::Tensor();  // no graph hangs on it: sent, it is not needed again
        break;
      }
      case Kind::SendGradient:
        send(i, slots_.at({a.micro_batch, a.chunk}).input.grad(), a.peer, what("gradient", a.micro_batch, a.chunk - 1));
        slots_.erase({a.micro_batch, a.chunk});
        break;
      default:
        break;  // receives: posted a compute ahead, waited where the compute needs them
    }
  }
  for (auto& [i, sent] : sends_) sent.second.wait();
  sends_.clear();
  slots_.clear();
  TORCH_CHECK(receives_.empty() && deferred_.empty(), "pipeline stage ", me_, ": ", receives_.size(), " receive(s) and ", deferred_.size(),
              " deferred weight gradient(s) of the step were never used");
  return loss_sum.item<double>();
}

double PipelineRunner::evaluate(const MicroBatch& batch, const LossFunction& loss) {
  double loss_sum = 0;
  at::Tensor x;
  std::vector<int64_t> shape = boundary_;  // the last batch of a validation set may be smaller
  shape[0] = batch.input.size(0);
  for (int c = 0; c <= last_; ++c) {
    if (!local(c)) continue;
    if (c == 0) {
      x = batch.input;
    } else if (!local(c - 1)) {
      x = at::empty(shape, options_);
      dtrain::recv(*stages_.pp, x, stages_.schedule.rank_of(c - 1), what("evaluation activation", 0, c));
    }
    x = model_->forward_chunk(stages_.local_index(c), x);
    if (c == last_) loss_sum = loss(x, batch.target).item<double>();
    else if (!local(c + 1)) dtrain::send(*stages_.pp, x.contiguous(), stages_.schedule.rank_of(c + 1), what("evaluation activation", 0, c + 1));
  }
  return loss_sum;
}

}  // namespace dtrain
