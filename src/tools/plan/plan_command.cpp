#include "tools/plan/plan_command.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "common/byte_words.h"
#include "common/flag_bounds.h"
#include "common/number_text.h"
#include "common/printable.h"
#include "launch/host_capacity.h"
#include "model/mixed_precision.h"
#include "tools/plan/compute_probes.h"
#include "tools/plan/plan_hardware.h"
#include "tools/plan/plan_report.h"

namespace dtrain {

namespace {

// The update probe's size: large enough to leave the caches, as a real shard does.
constexpr int64_t kUpdateProbeParameters = int64_t(1) << 24;

std::string gpu_list() {
  std::string s;
  for (const auto& name : gpu_names()) s += (s.empty() ? "" : ", ") + name;
  return s;
}

}  // namespace

void add_plan_flags(CLI::App& app, PlanFlags& f) {
  app.add_flag("--plan", f.plan, "rank the layouts for --world-size / --gpus by projected step time (docs/training.md, \"Planning a layout\")");
  app.add_option("--top", f.top, "--plan: layouts shown (default 5)")->check(whole_number(1, 1000));
  app.add_option("--peak-gflops", f.peak_gflops, "--plan: each rank's GEMM peak in GFLOP/s (default: --gpu-type's, or probed here)")
      ->check(CLI::PositiveNumber);
  app.add_option("--gpu-type", f.gpu_type, "--plan: the GPU whose datasheet peak to use: " + gpu_list());
  app.add_flag("--fp8", f.fp8, "--plan: the GPU's fp8 peak (twice its bf16)");
  app.add_option("--efficiency", f.efficiency,
                 "--plan: the share of --peak-gflops' or --gpu-type's peak the model's compute reaches (default 0.5); on this machine "
                 "without them the model itself is timed")
      ->check(CLI::Range(0.01, 1.0));
  app.add_option("--intra-gbps", f.intra_gbps, "--plan: intra-node bus bandwidth, GB/s")->check(CLI::PositiveNumber);
  app.add_option("--inter-gbps", f.inter_gbps, "--plan: inter-node bus bandwidth, GB/s")->check(CLI::PositiveNumber);
  app.add_option("--bench-comm", f.bench_comm, "--plan: a `dtrain bench-comm` table measured within a node: the intra-node link");
  app.add_option("--bench-comm-inter", f.bench_comm_inter, "--plan: a `dtrain bench-comm` table measured across nodes");
  app.add_option("--max-micro-batch", f.max_micro_batch, "--plan: the largest micro-batch tried (default: the global batch over dp)")
      ->check(whole_number(1, 1 << 20));
}

int run_plan(const PlanFlags& f, const PlanRequest& r) {
  const std::string origin = (r.config_path.empty() ? "demo config" : printable(r.config_path)) + (r.sets.empty() ? "" : " with --set");
  nlohmann::json user = read_config_file(r.config_path);
  apply_overrides(user, r.sets);
  const TrainConfig base = resolve_plan_base(user, r.world_size, origin);

  PlanOptions o;
  o.world_size = r.world_size;
  o.nodes = r.nodes;
  o.device_is_cpu = !r.gpu;
  o.device_memory = r.device_memory;
  o.max_micro_batch = f.max_micro_batch;
  o.efficiency = f.efficiency > 0 ? f.efficiency : 0.5;
  PlanContext context;
  context.model = base.model.describe();
  context.memory_from = byte_words(r.device_memory) + " per rank (" + r.device_memory_from + ")";

  std::shared_ptr<GemmPeakProbe> gemm_probe;
  std::shared_ptr<ModelRateProbe> model_probe;
  context.rate_from = "at " + fixed(100 * o.efficiency, 0) + "% of the peak";
  if (f.peak_gflops > 0) {
    o.gemm_flops = [peak = f.peak_gflops * 1e9](const MemoryLayout&) { return peak; };
    context.peak_from = "--peak-gflops " + fixed(f.peak_gflops, 1);
  } else if (!f.gpu_type.empty()) {
    const double peak = gpu_peak_flops(f.gpu_type, base.precision, f.fp8);
    o.gemm_flops = [peak](const MemoryLayout&) { return peak; };
    context.peak_from = f.gpu_type + " datasheet peak (" + (f.fp8 ? "fp8" : base.precision == at::kFloat ? "fp32" : "16-bit") + "), " +
                        fixed(peak / 1e12, 1) + " TFLOP/s";
  } else if (r.gpu) {
    throw std::invalid_argument("--gpu-type or --peak-gflops: give the GPUs' peak to plan for them (table: " + gpu_list() + ")");
  } else {
    // A vision-language model is built whole (it has no parts to time apart): its plan keeps the
    // GEMM peak × efficiency.
    const bool time_model = !base.model.is_vlm();
    if (time_model && f.efficiency > 0)
      throw std::invalid_argument(
          "--efficiency: applies to a peak given by --peak-gflops or --gpu-type; without them the plan times the model itself");
    at::set_num_threads(rank_threads(base.threads, r.world_size / r.nodes));
    const MixedPrecision mp = MixedPrecision::make(base.precision, at::kCPU);
    gemm_probe = std::make_shared<GemmPeakProbe>(mp.native_gemm ? mp.compute : at::kFloat, f.probe_seconds);
    o.gemm_flops = [gemm_probe](const MemoryLayout& l) { return (*gemm_probe)(l); };
    if (time_model) {
      model_probe =
          std::make_shared<ModelRateProbe>(mp, f.model_probe_seconds, [](const std::string& line) { std::cerr << line << std::endl; });
      o.model_flops = [model_probe](const std::vector<MemoryLayout>& layouts) { return (*model_probe)(layouts); };
      o.update_s_per_parameter = time_update_per_parameter(std::min<int64_t>(base.model.parameter_count(), kUpdateProbeParameters));
    } else {
      context.rate_from += " (a vision-language model's parts are not timed apart)";
    }
    context.peak_from = "the matmul probe at each layout's GEMM shape, " + std::to_string(at::get_num_threads()) + " thread(s) per rank";
  }

  o.links = default_links(r.gpu);
  context.links_from = r.gpu ? "defaults for GPUs" : "defaults for the CPU build";
  if (!f.bench_comm.empty()) o.links.intra_node = link_from_bench_comm(f.bench_comm, "--bench-comm"), context.links_from = "--bench-comm";
  if (!f.bench_comm_inter.empty())
    o.links.inter_node = link_from_bench_comm(f.bench_comm_inter, "--bench-comm-inter"), context.links_from += ", --bench-comm-inter";
  if (f.intra_gbps > 0) o.links.intra_node.bus_bytes_per_s = f.intra_gbps * 1e9, context.links_from += ", --intra-gbps";
  if (f.inter_gbps > 0) o.links.inter_node.bus_bytes_per_s = f.inter_gbps * 1e9, context.links_from += ", --inter-gbps";

  const Plan plan = plan_layouts(user, origin, o);
  if (gemm_probe)
    context.peak_from += " (" + std::to_string(gemm_probe->shapes()) + " shapes, best " + fixed(plan.peak_flops / 1e9, 1) + " GFLOP/s)";
  if (model_probe) {
    context.rate_from = "the model's embedding, a block and its head timed forward and backward at each layout's micro-batch (" +
                        std::to_string(model_probe->shapes()) +
                        " shapes), at whole width under tensor parallelism; the optimizer's update timed, " +
                        fixed(1e9 * o.update_s_per_parameter, 3) + " ns a parameter";
  }
  context.run_prefix = "build/dtrain run --nproc-per-node " + std::to_string(r.world_size / r.nodes) +
                       (r.nodes > 1 ? " --hostfile HOSTS" : "") + (r.config_path.empty() ? "" : " --config " + printable(r.config_path));
  // The user's own --set lines, but for the keys the plan sets.
  const std::vector<std::string> planned = LayoutChoice{}.sets();
  for (const std::string& set : r.sets) {
    const std::string key = set.substr(0, set.find('=') + 1);
    if (std::none_of(planned.begin(), planned.end(), [&](const std::string& p) { return p.rfind(key, 0) == 0; }))
      context.run_prefix += " --set " + set;
  }
  if (r.json) std::cout << plan_json(plan, o, context, f.top).dump(2) << "\n";
  else std::cout << plan_table(plan, o, context, f.top);
  return plan.ranked.empty() ? 1 : 0;
}

}  // namespace dtrain
