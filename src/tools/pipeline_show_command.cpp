// `dtrain pipeline show`: a pipeline schedule simulated for given per-action costs, printed as a text
// Gantt chart with its bubble beside the closed form, and per rank the peak micro-batches whose
// activations it holds (with their bytes for a config's model). A config also gives the pipeline
// the flags leave out.
#include "tools/pipeline_show_command.h"

#include <CLI/CLI.hpp>

#include <cmath>
#include <iomanip>
#include <iostream>

#include "common/byte_words.h"
#include "common/flag_bounds.h"
#include "common/number_text.h"
#include "common/parse_command_line.h"
#include "common/printable.h"
#include "parallel/pipeline/pipeline_schedule.h"
#include "parallel/pipeline/pipeline_simulator.h"
#include "parallel/pipeline/stage_split.h"
#include "tools/gantt_chart.h"
#include "tools/estimate/activation_memory.h"
#include "tools/pipeline_costs.h"
#include "tools/smallest_world.h"
#include "train/estimate_layout.h"
#include "train/train_config.h"

namespace dtrain {

namespace {

struct PipelineShowOptions {
  int pp = 4, micro_batches = 8, virtual_stages = 1;
  std::string schedule = "1f1b";
  std::string costs, config, trace;
};

// What --config contributes: the pipeline, its micro-batches and the activations of its chunks.
struct ConfigPipeline {
  int pp = 1, micro_batches = 1, virtual_stages = 1;
  std::string schedule, split;   // split: describe_split's line
  std::vector<int64_t> bytes;    // each chunk's activations for one micro-batch
};

// The config with `sets` (the pipeline flags given, which win) written over its keys, for the
// smallest world that holds its layout.
TrainConfig resolve_for_show(const std::string& path, const std::vector<std::string>& sets) {
  return resolve_at_smallest_world(path, sets, printable(path) + (sets.empty() ? "" : " with the pipeline flags"));
}

// Each chunk's activations for one micro-batch, in bytes, its blocks as the split gives them (none
// recomputed), the head's on the last chunk: the memory estimate's per-token counts
// (tools/estimate/activation_memory.h) for the config's precision, tp and sp.
std::vector<int64_t> chunk_activation_bytes(const MemoryLayout& layout, const std::vector<int>& split) {
  const double tokens = tokens_per_micro_batch(layout);
  std::vector<int64_t> bytes;
  for (size_t c = 0; c < split.size(); ++c)
    bytes.push_back(int64_t(tokens * (split[c] * block_bytes_per_token(layout) + (c + 1 == split.size() ? head_bytes_per_token(layout) : 0))));
  return bytes;
}

// The config's pipeline: parallel.pp, parallel.pipeline.{schedule, virtual_stages, split} and
// gradient_accumulation_steps, each flag in `sets` in place of its key. The chunks' blocks are the
// config's split: the cost model's, or the one it gives; a split "auto", timed when a run starts,
// is the cost model's here.
ConfigPipeline read_config_pipeline(const std::string& path, const std::vector<std::string>& sets) {
  const TrainConfig c = resolve_for_show(path, sets);
  const PipelineOptions& p = c.pipeline;
  const LayerCosts costs = model_layer_costs(c.model, c.micro_batch);
  const int chunks = c.parallel.pp * p.virtual_stages;
  const std::vector<int> split = p.measure_split ? balance_split(costs, c.model.n_layer, chunks) : p.split;
  const std::string source = p.measure_split ? "cost model; \"auto\" times it when a run starts"
                             : c.json["parallel"]["pipeline"]["split"].is_null() ? "cost model"
                                                                                 : "parallel.pipeline.split";
  return {c.parallel.pp, int(c.accumulation), p.virtual_stages, schedule_name(p.schedule), describe_split(split, costs, source),
          chunk_activation_bytes(estimate_layout(c, true, 1), split)};
}

std::string costs_text(const PipelineCosts& c, ScheduleKind kind) {
  std::string out = "F " + plain(c.forward) + ", B " + plain(c.backward);
  if (kind == ScheduleKind::ZeroBubble) out += " (I " + plain(c.input()) + " + W " + plain(c.weight) + ")";
  return out + ", comm " + plain(c.comm);
}

std::string percent(double fraction) { return std::isnan(fraction) ? "n/a" : fixed(100 * fraction, 1) + "%"; }

}  // namespace

int pipeline_command(int argc, char** argv) {
  PipelineShowOptions o;
  CLI::App app{"pipeline schedules as data", "dtrain pipeline"};
  auto* show = app.add_subcommand(
      "show", "simulate a schedule for per-action costs: each rank's timeline as a text Gantt chart, the bubble beside its closed "
              "form, and the peak micro-batches whose activations each rank holds");
  show->add_option("--pp", o.pp, "pipeline ranks (default: --config's parallel.pp, else 4)")->check(whole_number(1, 64));
  show->add_option("--micro-batches", o.micro_batches, "micro-batches per step (default: --config's gradient_accumulation_steps, else 8)")
      ->check(whole_number(1, 1024));
  show->add_option("--schedule", o.schedule, schedule_names() + " (default: --config's parallel.pipeline.schedule, else 1f1b)");
  show->add_option("--virtual-stages", o.virtual_stages,
                   "chunks per rank, interleaved_1f1b (default: --config's parallel.pipeline.virtual_stages, else 1)")
      ->check(whole_number(1, 16));
  show->add_option("--costs", o.costs, "per-chunk action costs, F=1,B=2,W=1 by default (F, B, I, W, comm; zero_bubble's I is B - W)");
  show->add_option("--config", o.config,
                   "a dtrain config: its pipeline (parallel.pp, parallel.pipeline.*, gradient_accumulation_steps) where no flag gives "
                   "one, and the activations' bytes for its model, micro-batch and split");
  show->add_option("--trace", o.trace, "a run's trace.json: the mean traced F, B, I and W as the costs (in us)");
  app.require_subcommand(1);
  if (const auto code = parse_command_line(app, argc, argv)) return *code;

  if (!schedule_kind(o.schedule))
    throw std::invalid_argument("--schedule '" + printable(o.schedule) + "' is not one of " + schedule_names());
  ConfigPipeline from_config;
  if (!o.config.empty()) {
    std::vector<std::string> flags_given;
    if (show->count("--pp")) flags_given.push_back("parallel.pp=" + std::to_string(o.pp));
    if (show->count("--schedule")) flags_given.push_back("parallel.pipeline.schedule=" + o.schedule);
    if (show->count("--virtual-stages")) flags_given.push_back("parallel.pipeline.virtual_stages=" + std::to_string(o.virtual_stages));
    // The micro-batches per step, under either of their names, and the global batch they make.
    if (show->count("--micro-batches"))
      flags_given.insert(flags_given.end(), {"gradient_accumulation_steps=" + std::to_string(o.micro_batches), "parallel.micro_batches=auto",
                                             "train_batch_size=auto"});
    from_config = read_config_pipeline(o.config, flags_given);
    o.pp = from_config.pp;
    o.micro_batches = from_config.micro_batches;
    o.virtual_stages = from_config.virtual_stages;
    o.schedule = from_config.schedule;
  }
  const auto kind = schedule_kind(o.schedule);
  PipelineSchedule schedule;
  try {
    schedule = make_schedule(*kind, o.pp, o.virtual_stages, o.micro_batches);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--pp " + std::to_string(o.pp) + " --virtual-stages " + std::to_string(o.virtual_stages) +
                                " --micro-batches " + std::to_string(o.micro_batches) + ": " + e.what());
  }
  PipelineCosts costs;
  std::vector<PipelineCosts> per_chunk;  // a trace's own, where it has one per chunk of this schedule
  std::string cost_source = "the defaults", unit = "time unit(s)";
  if (!o.trace.empty()) {
    const TraceCosts traced = trace_costs(o.trace);
    costs = traced.costs;
    cost_source = printable(o.trace) + ": " + traced.how;
    unit = "us";
    if (int(traced.chunks.size()) == schedule.chunks())
      per_chunk = traced.chunks;
    else
      cost_source += "; every chunk at the means (the trace's slices give " + std::to_string(traced.chunks.size()) +
                     " chunk(s) their own, the schedule has " + std::to_string(schedule.chunks()) + ")";
  }
  if (!o.costs.empty()) {
    costs = parse_costs(o.costs, costs);
    for (PipelineCosts& c : per_chunk) c = parse_costs(o.costs, c);
    cost_source = o.trace.empty() ? "--costs" : cost_source + ", then --costs";
  }
  const std::vector<int64_t> bytes = o.config.empty() ? std::vector<int64_t>{} : peak_in_flight(schedule, from_config.bytes);

  const PipelineTimeline timeline = per_chunk.empty() ? simulate_pipeline(schedule, costs) : simulate_pipeline(schedule, per_chunk);
  const GanttChart chart = gantt_chart(timeline);
  std::string chunk_costs;
  for (size_t c = 0; c < per_chunk.size(); ++c) chunk_costs += (c ? "; " : "") + std::to_string(c) + ": " + costs_text(per_chunk[c], *kind);
  std::cout << o.schedule << ": pp " << o.pp << ", " << o.micro_batches << " micro-batches, " << o.virtual_stages
            << " chunk(s) per rank; costs " << costs_text(costs, *kind) << " (" << cost_source << ")\n"
            << (per_chunk.empty() ? "" : "simulated with each chunk's own costs: " + chunk_costs + "\n")
            << (o.config.empty() ? "" : printable(o.config) + ": " + from_config.split + "\n")
            << "one column = " << plain(chart.column_time) << " " << unit << "\n\n";
  for (int r = 0; r < o.pp; ++r) std::cout << "rank " << r << (r < 10 ? "  " : " ") << chart.rows[r] << "\n";
  std::cout << gantt_legend() << "\n\n"
            << "bubble " << percent(timeline.bubble_fraction) << " simulated, " << percent(closed_form_bubble(*kind, o.pp, o.virtual_stages, o.micro_batches, costs))
            << " by " << closed_form_text(*kind) << "; step " << plain(timeline.makespan) << " " << unit << "\n\n"
            << "rank  peak micro-batches in flight" << (bytes.empty() ? "" : "  their activations (memory estimate, nothing recomputed)") << "\n";
  for (int r = 0; r < o.pp; ++r) {
    std::cout << std::setw(4) << r << "  " << std::setw(28) << timeline.peak_in_flight[r];
    if (!bytes.empty()) std::cout << "  " << byte_words(double(bytes[r]));
    std::cout << "\n";
  }
  if (*kind == ScheduleKind::ZeroBubble)
    std::cout << "(zero_bubble holds a micro-batch until its W, which reads the inputs its layers saved)\n";
  return 0;
}

}  // namespace dtrain
