#include "train/hf_weights.h"

#include <exception>
#include <stdexcept>

#include "common/elapsed.h"
#include "common/number_text.h"
#include "hf/hf_checkpoint_reader.h"
#include "hf/hf_export.h"
#include "train/rank_agreement.h"

namespace dtrain {

namespace {
}  // namespace

void load_init_from(const TrainConfig& config, ParallelPlan& plan, World& world, RankLog& log) {
  const auto t0 = SteadyClock::now();
  std::exception_ptr error;
  try {
    plan.optimizer->finish_parameter_updates();  // no gather may write into what is loaded
    HfCheckpointReader hf(config.init_from, config.model);
    load_hf_parameters(hf, plan.layout.parameters);
    plan.evict_offloaded();
  } catch (...) {
    error = std::current_exception();
  }
  const std::vector<int> failed = ranks_that_failed(world, !error, "model.init_from");
  if (error) std::rethrow_exception(error);
  if (!failed.empty())
    throw std::runtime_error("rank " + std::to_string(failed.front()) + " could not read model.init_from " + config.init_from +
                             " (its log says why), so this rank stops too");
  log.info("model.init_from: loaded " + config.init_from + " (" + config.model.describe() + ", " + fixed(seconds_since(t0), 2) + " s)");
}

void export_save_to_hf(const TrainConfig& config, const std::string& dir, RankLog& log) {
  const auto t0 = SteadyClock::now();
  HfExportOptions options;
  options.dtype = config.precision;
  export_hf_checkpoint(dir, dir + "/hf", options);
  log.info("checkpoint: " + dir + "/hf, a Hugging Face model (zero_optimization.stage3_gather_16bit_weights_on_model_save; " +
           fixed(seconds_since(t0), 2) + " s)");
}

}  // namespace dtrain
