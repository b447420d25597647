// SGD with momentum, dampening, Nesterov and L2 weight decay, matching torch.optim.SGD, over a
// flat buffer.
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

class Sgd : public ElementwiseOptimizer {
 public:
  Sgd(SgdOptions options, const at::Tensor& like);
  void step_pieces(const std::vector<StatePiece>& pieces, double lr) override;
  std::map<std::string, at::Tensor> state() const override;
  void load_state(const std::map<std::string, at::Tensor>& state) override;
  double base_lr() const override { return options_.lr; }

 private:
  SgdOptions options_;
  at::Tensor momentum_buffer_;
  int64_t steps_ = 0;
};

}  // namespace dtrain
