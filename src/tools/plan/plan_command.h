// `dtrain estimate --plan`'s own flags and its run: where the compute peak and the link speeds come
// from (plan_hardware.h), and the plan printed as a table or JSON (plan_report.h).
#pragma once
#include <CLI/CLI.hpp>

#include <string>
#include <vector>

namespace dtrain {

struct PlanFlags {
  bool plan = false;
  int top = 5;
  double peak_gflops = 0;  // per rank; 0: the GPU table or the probe
  std::string gpu_type;    // A100, H100, H200, B200
  bool fp8 = false;
  double efficiency = 0;  // of a given peak; 0: 0.5 there, and on the CPU build the model is timed instead
  double intra_gbps = 0, inter_gbps = 0;  // bus bandwidth; 0: a bench-comm table or the defaults
  std::string bench_comm, bench_comm_inter;
  int64_t max_micro_batch = 0;
  double probe_seconds = 0.3;      // the matmul probe per GEMM shape on the CPU build
  double model_probe_seconds = 5;  // the model probe's rounds over every micro-batch, at least
};

void add_plan_flags(CLI::App& app, PlanFlags& flags);

// What `dtrain estimate` resolved before the plan: the config and its --set lines, the ranks, and
// each rank's memory.
struct PlanRequest {
  std::string config_path;
  std::vector<std::string> sets;
  int world_size = 1, nodes = 1;
  bool gpu = false;
  double device_memory = 0;
  std::string device_memory_from;
  bool json = false;
};

// Prints the plan; returns the exit code (1 when no layout fits).
int run_plan(const PlanFlags& flags, const PlanRequest& request);

}  // namespace dtrain
