// A rank of the vision-language training tests, started by `dtrain launch`: the trainer's own
// pieces (the config, the mesh, parallelize(), the step executor, the optimizer step, the
// validation loss and the checkpoint's state), with a SyntheticImageText dataset in place of the
// trainer's data sources. Usage: worker_vlm_steps OUT [dotted.key=value ...].
//   OUT/metrics.jsonl  (rank 0) {"step", "loss", "grad_norm"} per step and {"step", "val_loss"} at the end;
//   OUT/ckpt/step-N/   the parameters after the last step, as a checkpoint holds them;
//   stdout             "rank R drew I images in B training batches".
// Exits non-zero with the error on any failure, a collective's timeout (dist.timeout_s) included.
#include <ATen/Parallel.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "ckpt/checkpoint_manager.h"
#include "comm/collectives.h"
#include "comm/world.h"
#include "launch/worker_env.h"
#include "optim/lr_schedule.h"
#include "synthetic_image_text.h"
#include "train/train_config.h"
#include "train/evaluation.h"
#include "train/optimizer_step.h"
#include "train/parallelize.h"
#include "train/run_mesh.h"
#include "train/stability_guard.h"
#include "train/step_executor.h"
#include "train/training_state.h"

using namespace dtrain;

namespace {

void save_parameters(const std::string& dir, World& world, ParallelPlan& plan, const TrainConfig& c, int64_t step) {
  if (world.rank() == 0) std::filesystem::create_directories(dir);
  barrier(*world.world_group(), "checkpoint directory");
  TrainerProgress progress;
  progress.step = step;
  save_training_state(dir, world.rank(), plan.layout, *plan.optimizer, progress, c.json);
  barrier(*world.world_group(), "checkpoint written");
  if (world.rank() == 0) write_training_index(dir, plan.layout, *plan.optimizer, c.model);
}

int run(const std::string& out, const std::vector<std::string>& sets) {
  nlohmann::json user = nlohmann::json::object();
  apply_overrides(user, sets);
  const WorkerEnv env = derive_worker_env(current_env());
  TrainConfig c = resolve_config(user, env.world_size, "worker_vlm_steps");
  WorldOptions options;
  options.timeout = std::chrono::milliseconds(int64_t(c.timeout_s * 1000));
  const std::shared_ptr<World> world = World::init(options, env);
  std::vector<std::string> lines;
  const std::shared_ptr<DeviceMesh> mesh = make_run_mesh(*world, c, lines);
  Transformer model{nullptr};
  ParallelPlan plan = parallelize(model, *world, mesh, c);
  std::vector<at::Tensor> replicated = plan.replicated_parameters();
  broadcast(*mesh->group("dp_cp"), replicated, 0, "broadcast parameters");

  const auto data = std::make_shared<test::SyntheticImageText>(c.model, 32, 8);
  MicroBatchStream stream(data, mesh->size("dp"), mesh->coord("dp"), int(c.micro_batch), c.accumulation,
                          SamplerOptions{/*shuffle=*/false, c.seed, /*drop_last=*/true});
  const std::unique_ptr<StepExecutor> executor = make_step_executor(model, plan, stream, c, world->device(), nullptr);
  StabilityGuard guard(c.stability);
  const LrSchedule schedule(c.scheduler, plan.optimizer->base_lr(), c.steps);
  std::ofstream metrics;
  if (world->rank() == 0) metrics.open(out + "/metrics.jsonl");
  for (int64_t step = 0; step < c.steps; ++step) {
    const PassesResult passes = executor->run(step + 1, std::nullopt);
    at::Tensor loss = at::tensor({passes.loss}, at::kDouble).to(world->device());
    all_reduce(*mesh->group("dp_cp"), loss, ReduceOp::Avg, "loss");
    const UpdateOutcome update = apply_optimizer_step(plan, guard, loss.item<double>(), 0, schedule.lr(step), c.gradient_clipping);
    if (metrics.is_open()) metrics << nlohmann::json{{"step", step + 1}, {"loss", loss.item<double>()}, {"grad_norm", update.grad_norm}}.dump() << "\n";
  }
  const std::optional<double> val = validation_loss(model, plan, *executor, *data, c, *world);
  if (metrics.is_open() && val) metrics << nlohmann::json{{"step", c.steps}, {"val_loss", *val}}.dump() << "\n";
  save_parameters(out + "/ckpt/" + CheckpointManager::step_dir_name(c.steps), *world, plan, c, c.steps);
  std::cout << "rank " << world->rank() << " drew " << data->images_drawn() << " images in " << data->batches_drawn() << " training batches"
            << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  at::set_num_threads(1);
  if (argc < 2) {
    std::cerr << "usage: worker_vlm_steps OUT [dotted.key=value ...]\n";
    return 2;
  }
  try {
    return run(argv[1], std::vector<std::string>(argv + 2, argv + argc));
  } catch (const std::exception& e) {
    std::cerr << "ERROR " << e.what() << "\n";
    return 1;
  }
}
