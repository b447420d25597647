// SGD with momentum, dampening, Nesterov and L2 weight decay, matching torch.optim.SGD, over flat
// buffers.
#pragma once
#include "optim/flat_optimizer.h"

namespace dtrain {

struct SgdOptions {
  double lr = 1e-2;
  double momentum = 0;
  double dampening = 0;
  double weight_decay = 0;
  bool nesterov = false;
};

class Sgd : public ElementwiseRule {
 public:
  explicit Sgd(SgdOptions options) : options_(options) {}
  std::vector<std::string> state_names() const override { return {"momentum_buffer"}; }
  void update(const std::vector<StatePiece>& pieces, const std::vector<at::Tensor>& state, int64_t step, double lr,
              const GradUse& use) override;
  double base_lr() const override { return options_.lr; }

 private:
  SgdOptions options_;
};

}  // namespace dtrain
