// The passes the fused bias + GELU and the bias-gradient sums replaced, against ATen's unfused ops,
// at the bench model's shapes (2,048 tokens, d 384, ff 1536) in bf16, timed in one process in
// alternating rounds: each figure is the best of `--reps` calls within a round, and the table gives
// every round's ratio unfused / fused and their median. With --buffers N the calls cycle through N
// copies of the operands, so that (for N large enough to overflow the caches) each call reads them
// from memory, as a training step does, where the GEMM before and the one after have used the cache.
// Usage: build/bench_bias_gelu [--threads 2] [--rounds 5] [--reps 10] [--buffers 1]
#include <CLI/CLI.hpp>
#include <ATen/ATen.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/fused/bias_gelu_kernel.h"
#include "model/fused/token_sum.h"

namespace {

double best_ms(const std::function<void()>& run, int reps) {
  double best = 1e300;
  for (int i = 0; i < reps; ++i) {
    const auto start = std::chrono::steady_clock::now();
    run();
    best = std::min(best, std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  int threads = 2, rounds = 5, reps = 10, buffers = 1;
  CLI::App app{"Fused bias + GELU and bias-gradient sums against ATen's unfused ops."};
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--rounds", rounds, "alternating rounds")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--reps", reps, "calls per figure (the best is kept)")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--buffers", buffers, "copies of the operands the calls cycle through")->capture_default_str()->check(dtrain::whole_number(1, 4096));
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;
  at::set_num_threads(threads);
  const int64_t tokens = 2048, d = 384, ff = 1536;
  struct Operands {
    at::Tensor y, g, g_d, pre;
  };
  const at::Tensor b = at::randn({ff});
  std::vector<Operands> copies;
  for (int i = 0; i < buffers; ++i) {
    const at::Tensor y = at::randn({tokens, ff}).to(at::kBFloat16);
    copies.push_back({y, at::randn({tokens, ff}).to(at::kBFloat16), at::randn({tokens, d}).to(at::kBFloat16), y + b.to(at::kBFloat16)});
  }
  size_t next = 0;
  auto operands = [&]() -> const Operands& { return copies[next++ % copies.size()]; };
  struct Pair {
    std::string name;
    std::function<void()> unfused, fused;
  };
  const std::vector<Pair> pairs{
      {"bias + GELU forward [2048, 1536]", [&] { at::gelu(operands().y + b.to(at::kBFloat16), "tanh"); },
       [&] { dtrain::bias_gelu_forward_cpu(operands().y, b); }},
      {"GELU backward + bias gradient [2048, 1536]",
       [&] {
         const Operands& o = operands();
         at::sum(at::gelu_backward(o.g, o.pre, "tanh"), {0}, false, at::kFloat);
       },
       [&] {
         const Operands& o = operands();
         dtrain::bias_gelu_backward_cpu(o.g, o.y, b, true);
       }},
      {"bias gradient [2048, 384]", [&] { at::sum(operands().g_d, {0}, false, at::kFloat); },
       [&] { dtrain::sum_over_tokens_fp32(operands().g_d); }},
  };
  std::printf("| pass (bf16, %d threads, %d operand copies) | unfused ms (best round) | fused ms (best round) | unfused/fused per round | median |\n"
              "|---|---:|---:|---|---:|\n", threads, buffers);
  for (const Pair& p : pairs) {
    double best_unfused = 1e300, best_fused = 1e300;
    std::vector<double> ratios;
    std::string text;
    for (int r = 0; r < rounds; ++r) {
      const double u = best_ms(p.unfused, reps), f = best_ms(p.fused, reps);
      best_unfused = std::min(best_unfused, u);
      best_fused = std::min(best_fused, f);
      ratios.push_back(u / f);
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%s%.1f", r ? " " : "", u / f);
      text += buf;
    }
    std::sort(ratios.begin(), ratios.end());
    std::printf("| %s | %.2f | %.2f | %s | %.1f× |\n", p.name.c_str(), best_unfused, best_fused, text.c_str(), ratios[ratios.size() / 2]);
  }
}
