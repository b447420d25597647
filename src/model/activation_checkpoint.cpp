#include "model/activation_checkpoint.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <mutex>
#include <stdexcept>

namespace dtrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// What backward needs besides the saved inputs: the segment and the generator state it ran under.
struct SegmentState : torch::CustomClassHolder {
  Segment segment;
  size_t segment_inputs = 0;  // the inputs the segment takes; a placeholder may follow them
  at::Generator generator;
  at::Tensor rng_state;
};

at::Generator generator_of(const std::vector<at::Tensor>& inputs) {
  const at::Device device = inputs.empty() ? at::Device(at::kCPU) : inputs[0].device();
  return at::globalContext().defaultGenerator(device);
}

at::Tensor rng_state(at::Generator& g) {
  std::lock_guard<std::mutex> lock(g.mutex());
  return g.get_state();
}

void set_rng_state(at::Generator& g, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(g.mutex());
  g.set_state(state);
}

struct CheckpointFunction : public torch::autograd::Function<CheckpointFunction> {
  // The inputs come as a TensorList: autograd counts each of its tensors as an input.
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<SegmentState> state, at::TensorList inputs) {
    state->rng_state = rng_state(state->generator);
    ctx->save_for_backward(inputs.vec());
    at::Tensor out;
    {
      at::AutoGradMode no_grad(false);
      out = state->segment(inputs.slice(0, state->segment_inputs).vec());
    }
    ctx->saved_data["segment"] = c10::IValue::make_capsule(std::move(state));
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    auto state = c10::static_intrusive_pointer_cast<SegmentState>(ctx->saved_data["segment"].toCapsule());
    variable_list inputs;
    for (const auto& saved : ctx->get_saved_variables())
      inputs.push_back(saved.detach().requires_grad_(saved.requires_grad()));
    const at::Tensor outer_state = rng_state(state->generator);
    set_rng_state(state->generator, state->rng_state);
    at::Tensor out;
    {
      at::AutoGradMode grad(true);
      out = state->segment(std::vector<at::Tensor>(inputs.begin(), inputs.begin() + state->segment_inputs));
    }
    set_rng_state(state->generator, outer_state);
    torch::autograd::backward({out}, {grad_outputs[0]});
    variable_list grads{at::Tensor()};  // the segment itself takes no gradient
    for (const auto& x : inputs) grads.push_back(x.requires_grad() ? x.grad() : at::Tensor());
    return grads;
  }
};

}  // namespace

at::Tensor checkpoint(Segment segment, const std::vector<at::Tensor>& inputs) {
  if (!at::GradMode::is_enabled()) return segment(inputs);
  auto state = c10::make_intrusive<SegmentState>();
  state->segment = std::move(segment);
  state->segment_inputs = inputs.size();
  state->generator = generator_of(inputs);
  // Autograd records the function only if some input requires grad. When none does (the first block
  // after frozen embeddings) the segment's parameters still need their gradients, so an empty
  // placeholder that requires grad goes along.
  std::vector<at::Tensor> recorded = inputs;
  if (std::none_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.requires_grad(); }))
    recorded.push_back(at::empty({0}, inputs.empty() ? at::TensorOptions() : inputs[0].options()).requires_grad_());
  return CheckpointFunction::apply(state, at::TensorList(recorded))[0];
}

ActivationCheckpointing ActivationCheckpointing::parse(const std::string& text) {
  ActivationCheckpointing a;
  if (text == "none") return a;
  if (text == "full") a.mode = Mode::Full;
  else if (text == "selective") a.mode = Mode::Selective;
  else if (text.rfind("every:", 0) == 0) {
    const std::string n = text.substr(6);
    size_t used = 0;
    int every = 0;
    try {
      every = std::stoi(n, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (n.empty() || used != n.size() || every < 1)
      throw std::invalid_argument("'" + text + "': every:N needs a whole number N >= 1");
    a.mode = Mode::Every;
    a.every = every;
  } else {
    throw std::invalid_argument("'" + text + "' is not one of none, full, selective, every:N");
  }
  return a;
}

std::string ActivationCheckpointing::describe() const {
  switch (mode) {
    case Mode::None: return "none";
    case Mode::Full: return "full";
    case Mode::Selective: return "selective";
    case Mode::Every: return "every:" + std::to_string(every);
  }
  return "none";
}

bool ActivationCheckpointing::whole_block(int layer) const {
  return mode == Mode::Full || (mode == Mode::Every && layer % every == 0);
}

}  // namespace dtrain
