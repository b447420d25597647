// `dtrain bench-comm`: collective bandwidth in the style of nccl-tests. Every result is verified
// against its closed form, so a fast but wrong collective shows up in the `wrong` column.
#include "tools/bench_comm_command.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <map>

#include "comm/collectives.h"
#include "comm/world.h"
#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "common/printable.h"
#include "common/wait_limit.h"
#include "launch/worker_env.h"
#include "train/host_memory.h"

namespace dtrain {
namespace {

const std::vector<std::string> kOps{"all_reduce", "all_gather", "reduce_scatter", "broadcast"};

struct BenchCommOptions {
  int64_t min_bytes = 1024;
  int64_t max_bytes = 64 << 20;
  int64_t factor = 4;
  int iters = 20;
  int warmup = 3;
  std::vector<std::string> ops = kOps;
  std::string dtype = "float32";
  double timeout_s = 120;
  std::string backend = "auto";
};

// nccl-tests' bus-bandwidth factors: what each rank's link must carry relative to the algorithm
// bandwidth, so results compare across rank counts and against the hardware's peak.
double bus_factor(const std::string& op, int n) {
  if (op == "all_reduce") return 2.0 * (n - 1) / n;
  if (op == "broadcast") return 1.0;
  return double(n - 1) / n;
}

at::ScalarType parse_dtype(const std::string& name) {
  static const std::map<std::string, at::ScalarType> kTypes{
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"int32", at::kInt}, {"int64", at::kLong}};
  auto it = kTypes.find(name);
  if (it == kTypes.end()) throw std::invalid_argument("--dtype '" + printable(name) + "' is not one of float32, float64, int32, int64");
  return it->second;
}

// What the flags cannot check one by one; an error message, empty when all is well. Checked before
// the world forms, so every rank refuses at once instead of failing inside the first collective.
std::string check_options(const BenchCommOptions& o) {
  if (o.min_bytes > o.max_bytes)
    return "--min-bytes " + std::to_string(o.min_bytes) + " is larger than --max-bytes " + std::to_string(o.max_bytes);
  for (const auto& op : o.ops)
    if (std::find(kOps.begin(), kOps.end(), op) == kOps.end())
      return "--ops: unknown collective '" + printable(op) + "' (known: all_reduce, all_gather, reduce_scatter, broadcast)";
  return "";
}

// One size of one collective, its buffers made once. `count` is the full vector in nccl-tests'
// convention (the gathered output of all_gather, the input of reduce_scatter).
class Measurement {
 public:
  Measurement(Group& g, std::string op, int64_t count, at::ScalarType dtype, const at::Device& device)
      : g_(g), op_(std::move(op)) {
    const int n = g.size();
    const int64_t chunk = count / n;
    auto opts = at::TensorOptions().dtype(dtype).device(device);
    const double sum = n * (n + 1) / 2.0;
    in_ = at::empty({op_ == "all_gather" ? chunk : count}, opts);
    if (op_ == "all_reduce") {
      out_ = in_;
      expected_ = at::full({count}, sum, opts);
    } else if (op_ == "all_gather") {
      out_ = at::empty({count}, opts);
      expected_ = at::arange(n, opts).repeat_interleave(chunk) + 1;
    } else if (op_ == "reduce_scatter") {
      out_ = at::empty({chunk}, opts);
      expected_ = at::full({chunk}, sum, opts);
    } else {  // broadcast: check_options admits no other
      out_ = in_;
      expected_ = at::full({count}, 7, opts);
    }
  }

  // Returns {seconds, wrong elements on this rank}.
  std::pair<double, int64_t> run() {
    const int r = g_.rank();
    in_.fill_(op_ == "broadcast" ? (r == 0 ? 7 : 0) : r + 1);
    barrier(g_, "bench-comm");
    auto t0 = std::chrono::steady_clock::now();
    if (op_ == "all_reduce") all_reduce(g_, in_, ReduceOp::Sum, "bench-comm");
    else if (op_ == "all_gather") all_gather(g_, in_, out_, "bench-comm");
    else if (op_ == "reduce_scatter") reduce_scatter(g_, in_, out_, ReduceOp::Sum, "bench-comm");
    else broadcast(g_, in_, 0, "bench-comm");
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return {seconds, out_.ne(expected_).sum().item<int64_t>()};
  }

 private:
  Group& g_;
  std::string op_;
  at::Tensor in_, out_, expected_;
};

}  // namespace

int bench_comm_command(int argc, char** argv) {
  BenchCommOptions o;
  CLI::App app{"Collective bandwidth table (nccl-tests style). Run under `dtrain launch`."};
  // Sizes up to 1 TiB: the sweep multiplies by --factor (at most 1024) without overflowing.
  constexpr int64_t kMaxBytes = int64_t(1) << 40;
  app.add_option("-b,--min-bytes", o.min_bytes, "smallest message in bytes")->capture_default_str()->check(whole_number(1, kMaxBytes));
  app.add_option("-e,--max-bytes", o.max_bytes, "largest message in bytes")->capture_default_str()->check(whole_number(1, kMaxBytes));
  app.add_option("-f,--factor", o.factor, "size multiplier between rows")->capture_default_str()->check(whole_number(2, 1024));
  app.add_option("-n,--iters", o.iters, "timed iterations per size")->capture_default_str()->check(whole_number(1, INT_MAX));
  app.add_option("-w,--warmup", o.warmup, "untimed iterations per size")->capture_default_str()->check(whole_number(0, INT_MAX));
  app.add_option("--ops", o.ops, "collectives to measure")->delimiter(',')->capture_default_str();
  app.add_option("--dtype", o.dtype, "float32 | float64 | int32 | int64")->capture_default_str();
  app.add_option("--timeout-s", o.timeout_s, "collective timeout")->capture_default_str()->check(real_number(0, kMaxWaitSeconds, true));
  app.add_option("--backend", o.backend, "auto (shared memory within a node) | gloo")
      ->capture_default_str()
      ->check(CLI::IsMember({"auto", "gloo"}));
  if (const auto code = parse_command_line(app, argc, argv)) return *code;
  if (auto error = check_options(o); !error.empty()) {
    std::cerr << "dtrain bench-comm: error: " << error << "\n";
    return 2;
  }
  const at::ScalarType dtype = parse_dtype(o.dtype);

  keep_freed_host_memory();
  WorldOptions wo;
  wo.backend = o.backend;
  wo.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  auto world = World::init(wo, derive_worker_env(current_env()));
  Group& g = *world->world_group();
  const int n = g.size();
  const int64_t elem = at::elementSize(dtype);
  if (g.rank() == 0)
    std::printf("# dtrain bench-comm: %d ranks, %s backend, %s, sum; time = slowest rank's mean over %d iterations\n",
                n, g.backend_name().c_str(), o.dtype.c_str(), o.iters);
  int64_t total_wrong = 0;
  for (const auto& op : o.ops) {
    if (g.rank() == 0)
      std::printf("# %s\n%12s %12s %10s %11s %11s %8s\n", op.c_str(), "size(B)", "count", "time(us)",
                  "algbw(GB/s)", "busbw(GB/s)", "wrong");
    for (int64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
      const int64_t count = std::max<int64_t>(bytes / elem / n, 1) * n;
      double total = 0;
      int64_t wrong = 0;
      Measurement m(g, op, count, dtype, world->device());
      for (int i = 0; i < o.warmup + o.iters; ++i) {
        auto [seconds, bad] = m.run();
        if (i >= o.warmup) total += seconds;
        wrong += bad;
      }
      at::Tensor stats = at::tensor({total / o.iters}, at::kDouble).to(world->device());
      all_reduce(g, stats, ReduceOp::Max, "bench-comm stats");
      at::Tensor wrong_all = at::tensor({wrong}, at::kLong).to(world->device());
      all_reduce(g, wrong_all, ReduceOp::Sum, "bench-comm stats");
      const double t = stats.item<double>();
      const double algbw = count * elem / t / 1e9;
      total_wrong += wrong_all.item<int64_t>();
      if (g.rank() == 0)
        std::printf("%12ld %12ld %10.1f %11.3f %11.3f %8ld\n", long(count * elem), long(count), t * 1e6, algbw,
                    algbw * bus_factor(op, n), long(wrong_all.item<int64_t>()));
    }
  }
  if (g.rank() == 0) std::printf("# out of bounds values: %ld %s\n", long(total_wrong), total_wrong ? "FAILED" : "OK");
  return total_wrong ? 1 : 0;
}

}  // namespace dtrain
