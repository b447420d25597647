#include "model/activation_checkpoint.h"

#include <ATen/core/ivalue.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
#include <mutex>
#include <optional>
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
  std::shared_ptr<ActivationStore> store;       // null: autograd saves every input
  std::vector<std::optional<StoredActivation>> stored;  // per segment input: kept by the store, or saved by autograd
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
    // An input the store keeps is not saved with autograd, so its memory goes once the caller drops it.
    std::vector<at::Tensor> saved = inputs.vec();
    if (state->store) state->stored.resize(state->segment_inputs);
    for (size_t i = 0; i < state->stored.size(); ++i) {
      if (!state->store->takes(inputs[i])) continue;
      state->stored[i] = state->store->save(inputs[i]);
      saved[i] = at::Tensor();
    }
    ctx->save_for_backward(saved);
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
    TORCH_CHECK(!state->store || state->stored.size() == state->segment_inputs,
                "a checkpointed segment was back-propagated twice: the store gave its inputs back after the first backward");
    variable_list inputs;
    const variable_list saved = ctx->get_saved_variables();
    for (size_t i = 0; i < saved.size(); ++i) {
      const bool kept = i < state->stored.size() && state->stored[i];
      if (kept) inputs.push_back(state->stored[i]->restore().detach().requires_grad_(state->stored[i]->requires_grad()));
      else inputs.push_back(saved[i].detach().requires_grad_(saved[i].requires_grad()));
    }
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
    if (state->store) state->stored.clear();  // the store's memory (a buffer slot) is free for the next forward pass
    return grads;
  }
};

}  // namespace

at::Tensor checkpoint(Segment segment, const std::vector<at::Tensor>& inputs, std::shared_ptr<ActivationStore> store, bool trains) {
  const bool input_needs_grad = std::any_of(inputs.begin(), inputs.end(), [](const at::Tensor& t) { return t.requires_grad(); });
  // Recorded with nothing to differentiate, its recomputation would have no graph to run backward through.
  if (!at::GradMode::is_enabled() || (!input_needs_grad && !trains)) return segment(inputs);
  auto state = c10::make_intrusive<SegmentState>();
  state->segment = std::move(segment);
  state->segment_inputs = inputs.size();
  state->store = std::move(store);
  state->generator = generator_of(inputs);
  // Autograd records the function only if some input requires grad. When none does (the first block
  // after frozen embeddings) the segment's parameters still need their gradients, so an empty
  // placeholder that requires grad goes along.
  std::vector<at::Tensor> recorded = inputs;
  if (!input_needs_grad)
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

int ActivationCheckpointing::whole_blocks(int first, int end) const {
  int n = 0;
  for (int layer = first; layer < end; ++layer) n += whole_block(layer);
  return n;
}

}  // namespace dtrain
