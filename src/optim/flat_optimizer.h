// Optimizers that step a whole flat parameter buffer with a handful of vectorised ops instead of
// a loop of small per-tensor kernels. `optimizer {type, params}` keeps DeepSpeed's meaning:
// AdamW / Adam (decoupled weight decay, as DeepSpeed's adam_w_mode) and SGD with momentum.
// Weight decay applies where FlatParameters::decay_spans() says (not to biases and norm weights).
#pragma once
#include <ATen/ATen.h>
#include <nlohmann/json.hpp>

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "optim/flat_parameters.h"

namespace dtrain {

// What an update does with the gradients it reads besides using them. Where the update is one fused
// pass, both happen as it reads each gradient; elsewhere the gradients are scaled in place first, as
// clipping on its own would, and zeroed in a pass after.
struct GradUse {
  double scale = 1;         // each gradient times this (the clipping factor)
  bool zero_after = false;  // leave them zero, for the next step to accumulate into
};

class FlatOptimizer {
 public:
  virtual ~FlatOptimizer() = default;
  // One update of `params` from `grads` at learning rate `lr`, the gradients used as `use` says.
  virtual void step(at::Tensor& params, const at::Tensor& grads, const Spans& decay, double lr, const GradUse& use) = 0;
  // After this every rank's parameters hold the last update whole (ZeRO's all-gathers of the updated
  // pieces may otherwise still be running into them while the next forward pass starts).
  virtual void finish_parameter_updates() {}
  // This rank's state: flat tensors, one value per element of the buffer it steps (a sharded
  // optimizer's: of its shard), and the step count as a 0-d tensor: the live tensors, in memory or,
  // under NVMe offload, the files' shared mappings.
  virtual std::map<std::string, at::Tensor> state() const = 0;
  // state()'s names and dtypes, and whether each is flat, without reading any values.
  struct StateEntry {
    std::string name;
    at::ScalarType dtype;
    bool flat;
  };
  virtual std::vector<StateEntry> state_entries() const;
  // Restores state(); throws naming the missing or mis-sized entry.
  virtual void load_state(const std::map<std::string, at::Tensor>& state) = 0;
  // The base learning rate (optimizer.params.lr) that schedules scale.
  virtual double base_lr() const = 0;
  // Bytes this rank keeps between steps: its state and any scratch the update reuses.
  virtual int64_t resident_bytes() const;
};

// A range of the parameters, its gradients, where in it weight decay applies, and where it sits in
// the optimizer's state.
struct StatePiece {
  at::Tensor params, grads;
  Spans decay;
  int64_t state_offset = 0;
};

// An optimizer whose update treats every element on its own (AdamW, SGD): any set of ranges of the
// buffer can be updated with the matching ranges of the state. ZeRO relies on it to update the
// scattered pieces a rank owns, one step counted for all of them.
class ElementwiseOptimizer : public FlatOptimizer {
 public:
  void step(at::Tensor& params, const at::Tensor& grads, const Spans& decay, double lr, const GradUse& use) final {
    step_pieces({{params, grads, decay, 0}}, lr, use);
  }
  virtual void step_pieces(const std::vector<StatePiece>& pieces, double lr, const GradUse& use) = 0;
};

// The arithmetic of an elementwise optimizer, apart from where its state lives: in memory
// (ResidentOptimizer), or in files streamed through buffers a sub-group at a time (NVMe offload).
class ElementwiseRule {
 public:
  virtual ~ElementwiseRule() = default;
  // The flat state tensors the rule keeps, one value per element each ("exp_avg", "exp_avg_sq").
  virtual std::vector<std::string> state_names() const = 0;
  // Step number `step` (1 for the first) of `pieces`, whose state_offset index `state` (tensors in
  // state_names()' order), their gradients used as `use` says.
  virtual void update(const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state, int64_t step, double lr,
                      const GradUse& use) = 0;
  virtual double base_lr() const = 0;
  // Bytes of scratch the update keeps between steps.
  virtual int64_t scratch_bytes() const { return 0; }
};

// The optimizer.params keys an optimizer.type takes (the type is case-insensitive); nullopt for a
// type dtrain does not know.
std::optional<std::set<std::string>> optimizer_param_names(const std::string& type);

// The rule `optimizer {type, params}` names. Throws naming the key at fault (unknown type or param,
// out-of-range value).
std::unique_ptr<ElementwiseRule> make_elementwise_rule(const nlohmann::json& spec);

// That rule with its state in memory, for a flat buffer like `like`.
std::unique_ptr<ElementwiseOptimizer> make_flat_optimizer(const nlohmann::json& spec, const at::Tensor& like);

}  // namespace dtrain
