#include "train/evaluation.h"

#include "comm/collectives.h"

namespace dtrain {

std::optional<double> validation_loss(Transformer& model, ParallelPlan& plan, StepExecutor& executor, const SampleDataset& dataset,
                                      const TrainConfig& c, World& world) {
  const int64_t available = std::min<int64_t>(dataset.size(Split::Validation), c.eval_samples);
  if (available == 0) return std::nullopt;
  at::NoGradGuard no_grad;
  if (!plan.sharded) {
    plan.optimizer->finish_parameter_updates();
    model->refresh_working_copy();
  }
  double sum = 0;
  int64_t count = 0;
  // Dealt by data-parallel coordinate: the ranks of one dp coordinate (tensor, pipeline or context
  // parallel peers) evaluate the same samples, together.
  const DeviceMesh& mesh = *plan.mesh;
  std::vector<int64_t> mine;
  for (int64_t i = mesh.coord("dp"); i < available; i += mesh.size("dp")) mine.push_back(i);
  for (size_t from = 0; from < mine.size(); from += size_t(c.micro_batch)) {
    std::vector<int64_t> chunk(mine.begin() + from, mine.begin() + std::min(mine.size(), from + size_t(c.micro_batch)));
    sum += executor.loss_of(dataset.batch(Split::Validation, chunk)) * double(chunk.size());
    count += int64_t(chunk.size());
  }
  auto totals = at::tensor({sum, double(count)}, at::kDouble).to(world.device());
  // Over cp too: each cp rank's loss is the mean over its part of every sequence, all parts alike in size.
  all_reduce(*mesh.group("dp_cp"), totals, ReduceOp::Sum, "eval");
  return totals[0].item<double>() / totals[1].item<double>();
}

}  // namespace dtrain
