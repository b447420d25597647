// What the planner's cost model (step_cost.h) assumes about the hardware, and where each number
// comes from: a GEMM peak from a table of GPU datasheets, a flag, or the matmul probe on this
// machine; the links' bus bandwidth and latency from defaults, flags or a `dtrain bench-comm` table.
#pragma once
#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "tools/plan/step_cost.h"

namespace dtrain {

// Dense tensor-core peaks per GPU, from NVIDIA's datasheets, in FLOP/s: A100 SXM 312 T (bf16/fp16),
// 19.5 T fp32; H100 SXM 989 T, 67 T fp32; H200 as H100 (the same chip, more memory); B200 2.25 P,
// 80 T fp32 (HGX B200). fp8 doubles the 16-bit figure (A100 has none). `precision` is the run's
// compute type (kFloat, kBFloat16, kHalf). Throws std::invalid_argument naming --gpu-type and the
// known names, or fp8 on an A100.
double gpu_peak_flops(const std::string& gpu, at::ScalarType precision, bool fp8);
std::vector<std::string> gpu_names();

// The defaults when no flag or table says otherwise. A GPU node: NVLink-class all-reduce bus bandwidth
// 200 GB/s at 10 µs per ring step, and one 200 Gb/s NIC per GPU across nodes, 25 GB/s at 20 µs. The
// CPU build: the shared-memory backend's all-reduce at 16-64 MiB on this project's 2-core machine,
// 3 GB/s at 10 µs, and Gloo's TCP over loopback across "nodes", 1.2 GB/s at 50 µs
// (docs/benchmarks.md, "Collectives" and "Pipeline parallelism").
Links default_links(bool gpu);

// The link a `dtrain bench-comm` table measured: the all-reduce's bus bandwidth at its largest size,
// and its per-step latency from the smallest size's time over the ring's 2(n-1) steps. Throws
// std::invalid_argument naming `flag`, the file, and what it lacks.
Link link_from_bench_comm(const std::string& path, const std::string& flag);

}  // namespace dtrain
