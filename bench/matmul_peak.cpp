// The start-up matmul probe (src/train/matmul_peak.h), repeated: how far apart its figures land on
// this machine, per GEMM type and thread count, for the bench model's largest layer (d 384 -> 1536,
// a micro-batch of 8 x 256 tokens). Prints a markdown table: each probe's figure, then min, median,
// max and the spread max/min.
// Usage: build/bench_matmul_peak [--repeats 8] [--threads 2] [--seconds 1.5]
#include <CLI/CLI.hpp>
#include <ATen/Parallel.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <vector>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/mixed_precision.h"
#include "train/matmul_peak.h"

int main(int argc, char** argv) {
  int repeats = 8, threads = 2;
  double seconds = 1.5;
  CLI::App app{"Repeated start-up matmul probes: how far apart they land."};
  app.add_option("--repeats", repeats, "probes per type")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--seconds", seconds, "each probe's length, as a run's (1.5)")->capture_default_str();
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;
  at::set_num_threads(threads);
  std::printf("| GEMMs | threads | probes (GFLOP/s) | min | median | max | max/min |\n|---|---:|---|---:|---:|---:|---:|\n");
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const bool native = dtrain::MixedPrecision::make(dtype, at::kCPU).native_gemm;
    std::vector<double> got;
    std::string listed;
    for (int i = 0; i < repeats; ++i) {
      got.push_back(dtrain::measure_matmul_flops(at::kCPU, 8 * 256, 384, 1536, seconds, dtype) / 1e9);
      char one[32];
      std::snprintf(one, sizeof one, "%s%.0f", i ? ", " : "", got.back());
      listed += one;
    }
    std::vector<double> sorted = got;
    std::sort(sorted.begin(), sorted.end());
    std::printf("| %s%s | %d | %s | %.0f | %.0f | %.0f | %.2f |\n", dtrain::precision_name(dtype).c_str(),
                native ? "" : " (no native units: ATen's fallback)", threads, listed.c_str(), sorted.front(), sorted[sorted.size() / 2],
                sorted.back(), sorted.back() / sorted.front());
  }
}
