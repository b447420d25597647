// `dtrain pipeline show`: a pipeline schedule simulated for given per-action costs, printed as a text
// Gantt chart with its bubble beside the closed form, and per rank the peak micro-batches whose
// activations it holds (with their bytes for a config's model).
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
#include "model/activation_bytes.h"
#include "parallel/pipeline/pipeline_schedule.h"
#include "parallel/pipeline/pipeline_simulator.h"
#include "tools/gantt_chart.h"
#include "tools/pipeline_costs.h"
#include "train/config_reader.h"
#include "train/config_schema.h"
#include "train/config_sections.h"

namespace dtrain {

namespace {

struct PipelineShowOptions {
  int pp = 4, micro_batches = 8, virtual_stages = 1;
  std::string schedule = "1f1b";
  std::string costs, config, trace;
};

// What --config contributes: the model and the micro-batch whose activations a rank holds.
struct ModelActivations {
  TransformerConfig model;
  int64_t micro_batch = 0;
};

// The model and train_micro_batch_size_per_gpu of a dtrain config, read as `dtrain run` reads them
// (merged over the defaults, unknown keys refused) but without resolving the layout, which the
// pipeline flags give here. Throws ConfigError naming the file and the key.
ModelActivations read_model(const std::string& path) {
  const std::string origin = printable(path);
  nlohmann::json merged = config_defaults();
  merge_checked(merged, read_config_file(path), "", origin);
  const Reader r(merged, origin);
  ModelActivations out{resolve_model(r), 0};
  const auto micro = r.integer_or_auto("train_micro_batch_size_per_gpu", 1);
  if (!micro)
    fail(origin, "'train_micro_batch_size_per_gpu' is \"auto\"; the activations' bytes need the micro-batch size, so give it");
  out.micro_batch = *micro;
  return out;
}

// Each chunk's activations for one micro-batch, in bytes, with the blocks cut as evenly as they go
// (the first chunks take one more), the head's on the last chunk. A run balances its split by cost,
// which moves blocks off the last chunk; the chart's figure is the even split's.
std::vector<int64_t> chunk_activation_bytes(const ModelActivations& m, int chunks, const std::string& path) {
  const int n = m.model.n_layer;
  if (n < chunks)
    throw ConfigError(printable(path) + ": 'model.n_layer' (" + std::to_string(n) + ") cannot give each of pp x virtual stages = " +
                      std::to_string(chunks) + " chunks a block");
  std::vector<int64_t> bytes;
  for (int c = 0; c < chunks; ++c) {
    const int blocks = n / chunks + (c < n % chunks ? 1 : 0);
    bytes.push_back(blocks * block_activation_bytes(m.model, m.micro_batch) +
                    (c == chunks - 1 ? head_activation_bytes(m.model, m.micro_batch) : 0));
  }
  return bytes;
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
  show->add_option("--pp", o.pp, "pipeline ranks")->check(whole_number(1, 64))->capture_default_str();
  show->add_option("--micro-batches", o.micro_batches, "micro-batches per step")->check(whole_number(1, 1024))->capture_default_str();
  show->add_option("--schedule", o.schedule, schedule_names())->capture_default_str();
  show->add_option("--virtual-stages", o.virtual_stages, "chunks per rank (interleaved_1f1b)")->check(whole_number(1, 16))->capture_default_str();
  show->add_option("--costs", o.costs, "per-chunk action costs, F=1,B=2,W=1 by default (F, B, I, W, comm; zero_bubble's I is B - W)");
  show->add_option("--config", o.config, "a dtrain config: the activations' bytes for its model and micro-batch");
  show->add_option("--trace", o.trace, "a run's trace.json: the mean traced F, B, I and W as the costs (in us)");
  app.require_subcommand(1);
  if (const auto code = parse_command_line(app, argc, argv)) return *code;

  const auto kind = schedule_kind(o.schedule);
  if (!kind) throw std::invalid_argument("--schedule '" + printable(o.schedule) + "' is not one of " + schedule_names());
  PipelineCosts costs;
  std::string cost_source = "the defaults", unit = "time unit(s)";
  if (!o.trace.empty()) {
    const TraceCosts traced = trace_costs(o.trace);
    costs = traced.costs;
    cost_source = printable(o.trace) + ": " + traced.how;
    unit = "us";
  }
  if (!o.costs.empty()) {
    costs = parse_costs(o.costs, costs);
    cost_source = o.trace.empty() ? "--costs" : cost_source + ", then --costs";
  }
  PipelineSchedule schedule;
  try {
    schedule = make_schedule(*kind, o.pp, o.virtual_stages, o.micro_batches);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument("--pp " + std::to_string(o.pp) + " --virtual-stages " + std::to_string(o.virtual_stages) +
                                " --micro-batches " + std::to_string(o.micro_batches) + ": " + e.what());
  }
  std::vector<int64_t> bytes;
  if (!o.config.empty()) bytes = peak_in_flight(schedule, chunk_activation_bytes(read_model(o.config), schedule.chunks(), o.config));

  const PipelineTimeline timeline = simulate_pipeline(schedule, costs);
  const GanttChart chart = gantt_chart(timeline);
  std::cout << o.schedule << ": pp " << o.pp << ", " << o.micro_batches << " micro-batches, " << o.virtual_stages
            << " chunk(s) per rank; costs " << costs_text(costs, *kind) << " (" << cost_source << ")\n"
            << "one column = " << plain(chart.column_time) << " " << unit << "\n\n";
  for (int r = 0; r < o.pp; ++r) std::cout << "rank " << r << (r < 10 ? "  " : " ") << chart.rows[r] << "\n";
  std::cout << gantt_legend() << "\n\n"
            << "bubble " << percent(timeline.bubble_fraction) << " simulated, " << percent(closed_form_bubble(*kind, o.pp, o.virtual_stages, o.micro_batches, costs))
            << " by " << closed_form_text(*kind) << "; step " << plain(timeline.makespan) << " " << unit << "\n\n"
            << "rank  peak micro-batches in flight" << (bytes.empty() ? "" : "  their activations (fp32 estimate)") << "\n";
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
