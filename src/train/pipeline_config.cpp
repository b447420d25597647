#include "train/pipeline_config.h"

#include <climits>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/printable_json.h"
#include "parallel/pipeline/stage_split.h"

namespace dtrain {

namespace {

const char* kMicroBatches = "gradient_accumulation_steps (parallel.micro_batches)";

// parallel.pipeline.split as a list of block counts; check_split says what is wrong with their values.
std::vector<int> split_of(const Reader& r, const nlohmann::json& given) {
  std::vector<int> split;
  for (const auto& v : given) {
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t(INT_MAX)
                      : v.is_number_integer() ? v.get<int64_t>() >= INT_MIN && v.get<int64_t>() <= INT_MAX
                                              : false;
    if (!fits)
      fail(r.origin(), "'parallel.pipeline.split' must list whole numbers of blocks, one per chunk, got " + printable_json(v) + " in " +
                           printable_json(given));
    split.push_back(v.get<int>());
  }
  return split;
}

void resolve_split(const Reader& r, TrainConfig& c, int chunks) {
  const nlohmann::json& given = r.at("parallel.pipeline.split");
  PipelineOptions& p = c.pipeline;
  if (given.is_null()) {
    p.split = balance_split(model_layer_costs(c.model, c.micro_batch), c.model.n_layer, chunks);
  } else if (given == "auto") {
    p.measure_split = true;
  } else if (given.is_array()) {
    p.split = split_of(r, given);
    try {
      check_split(p.split, c.parallel.pp, p.virtual_stages, c.model.n_layer);
    } catch (const std::invalid_argument& e) {
      fail(r.origin(), e.what());
    }
  } else {
    fail(r.origin(), "'parallel.pipeline.split' must be null (the cost model splits the blocks), \"auto\" (timed at start-up) or a "
                     "list of blocks per chunk, got " + printable_json(given));
  }
}

// The micro-batches a step runs through the pipeline: what each schedule needs of their number.
void check_micro_batches(const Reader& r, TrainConfig& c) {
  const int pp = c.parallel.pp;
  const int64_t m = c.accumulation;
  const std::string schedule = schedule_name(c.pipeline.schedule);
  if (pp == 1) return;
  if (c.pipeline.schedule == ScheduleKind::Interleaved1F1B && m % pp != 0)
    fail(r.origin(), std::string(kMicroBatches) + " is " + std::to_string(m) + ", which 'parallel.pp' (" + std::to_string(pp) +
                         ") does not divide: interleaved_1f1b runs the micro-batches in rounds of pp, as Megatron's interleaved "
                         "schedule requires; give a multiple of " + std::to_string(pp));
  const bool one_chunk_per_rank = c.pipeline.schedule == ScheduleKind::GPipe || c.pipeline.schedule == ScheduleKind::OneFOneB;
  if (one_chunk_per_rank && m < pp) {
    char bubble[32];
    std::snprintf(bubble, sizeof bubble, "%.0f%%", 100.0 * (pp - 1) / double(m + pp - 1));
    c.warnings.push_back(r.origin() + ": " + kMicroBatches + " is " + std::to_string(m) + ", fewer than parallel.pp (" + std::to_string(pp) +
                         "): the " + schedule + " pipeline idles " + bubble + " of each step ((p-1)/(m+p-1) = " + std::to_string(pp - 1) + "/" +
                         std::to_string(m + pp - 1) + "); " + std::to_string(pp) + " or more micro-batches per step keep every stage busy "
                         "for longer");
  }
}

}  // namespace

void resolve_pipeline(const Reader& r, TrainConfig& c) {
  PipelineOptions& p = c.pipeline;
  const int pp = c.parallel.pp, n_layer = c.model.n_layer;
  const std::string name = r.text("parallel.pipeline.schedule");
  const auto kind = schedule_kind(name);
  if (!kind)
    fail(r.origin(), "'parallel.pipeline.schedule' must be one of " + schedule_names() + ", got " +
                         printable_json(r.at("parallel.pipeline.schedule")));
  p.schedule = *kind;
  p.virtual_stages = r.small_integer("parallel.pipeline.virtual_stages", 1);
  if (p.virtual_stages > 1 && p.schedule != ScheduleKind::Interleaved1F1B)
    fail(r.origin(), "'parallel.pipeline.virtual_stages' is " + std::to_string(p.virtual_stages) + ", but parallel.pipeline.schedule " +
                         name + " runs one chunk per pp rank: several virtual stages need interleaved_1f1b");
  if (p.virtual_stages == 1 && p.schedule == ScheduleKind::Interleaved1F1B && pp > 1)
    c.warnings.push_back(r.origin() + ": parallel.pipeline.schedule interleaved_1f1b with parallel.pipeline.virtual_stages 1 is 1f1b: "
                                      "set virtual_stages to 2 or more to interleave");
  if (pp > n_layer)
    fail(r.origin(), "'parallel.pp' (" + std::to_string(pp) + ") is more than model.n_layer (" + std::to_string(n_layer) +
                         "): every pipeline stage holds at least one block");
  const long long chunks = (long long)pp * p.virtual_stages;
  if (chunks > n_layer)
    fail(r.origin(), "'parallel.pp' (" + std::to_string(pp) + ") x 'parallel.pipeline.virtual_stages' (" + std::to_string(p.virtual_stages) +
                         ") makes " + std::to_string(chunks) + " chunks, more than model.n_layer (" + std::to_string(n_layer) +
                         "): every chunk holds at least one block");
  resolve_split(r, c, int(chunks));
  check_micro_batches(r, c);
  if (c.grad_accum_16bit && pp > 1)
    c.warnings.push_back(r.origin() + ": data_types.grad_accum_dtype " + c.json["data_types"]["grad_accum_dtype"].get<std::string>() +
                         " with parallel.pp " + std::to_string(pp) + ": a pipeline's micro-batches interleave, so their gradients "
                         "accumulate in fp32; the data-parallel reduction still sends them in 16 bits");
}

}  // namespace dtrain
