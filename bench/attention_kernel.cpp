// Causal attention on the CPU in bf16: ATen's flash kernel (_scaled_dot_product_flash_attention_for_cpu
// and its backward) against dtrain's (src/model/fused/flash_attention.h), forward alone and forward +
// backward, on the bench model's attention (B 8, H 6, T 256, hd 64) and longer sequences with as many
// tokens (T 1024 with B 2, T 2048 with B 1). "ours" is dtrain's own forward kernel; the last columns
// are what the model runs: the faster forward for the CPU (FlashForward::Fastest, ATen's where it has
// AMX for bf16) and dtrain's backward. Rounds alternate the kernels; each cell is the best round's
// median. Prints a markdown table.
// Usage: build/bench_attention_kernel [--threads 2] [--rounds 5] [--reps 10]
#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <vector>

#include "common/parse_command_line.h"
#include "model/fused/flash_attention.h"

namespace {

struct Shape {
  int64_t B, H, T, hd;
};

struct Inputs {
  at::Tensor q, k, v, dout;
};

// q, k, v as the model hands them over: [B,T,H,hd] memory seen as [B,H,T,hd].
Inputs inputs(const Shape& s) {
  auto make = [&] { return at::randn({s.B, s.T, s.H, s.hd}).to(at::kBFloat16).transpose(1, 2); };
  return {make(), make(), make(), make()};
}

double median_ms(const std::function<void()>& run, int reps) {
  run();  // first call: kernels JIT-compiled, buffers allocated
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    const auto start = std::chrono::steady_clock::now();
    run();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::nth_element(ms.begin(), ms.begin() + reps / 2, ms.end());
  return ms[reps / 2];
}

void aten_forward(const Inputs& in) { at::_scaled_dot_product_flash_attention_for_cpu(in.q, in.k, in.v, 0.0, true); }
void aten_both(const Inputs& in) {
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(in.q, in.k, in.v, 0.0, true);
  at::_scaled_dot_product_flash_attention_for_cpu_backward(in.dout, in.q, in.k, in.v, out, lse, 0.0, true);
}
void ours_forward(const Inputs& in) { dtrain::flash_attention_forward(in.q, in.k, in.v, true, dtrain::FlashForward::Ours); }
void both(const Inputs& in, dtrain::FlashForward forward) {
  auto [out, lse] = dtrain::flash_attention_forward(in.q, in.k, in.v, true, forward);
  dtrain::flash_attention_backward(in.dout, in.q, in.k, in.v, out, lse, true);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ATen's CPU flash attention against dtrain's in bf16"};
  int threads = 2, rounds = 5, reps = 10;
  app.add_option("--threads", threads, "intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--rounds", rounds, "alternating rounds; each cell is the best round's median")->check(CLI::PositiveNumber);
  app.add_option("--reps", reps, "timed calls per round")->check(CLI::PositiveNumber);
  if (auto code = dtrain::parse_command_line(app, argc, argv)) return *code;
  at::set_num_threads(threads);

  const std::vector<Shape> shapes = {{8, 6, 256, 64}, {2, 6, 1024, 64}, {1, 6, 2048, 64}};
  std::printf("| B | H | T | hd | ATen fwd (ms) | ours fwd (ms) | fwd speed-up | ATen fwd+bwd (ms) | ours fwd+bwd (ms) | fwd+bwd speed-up | "
              "faster fwd + our bwd (ms) | its speed-up over ATen |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const Shape& s : shapes) {
    const Inputs in = inputs(s);
    if (!dtrain::flash_attention_serves(in.q, in.k, in.v)) {
      std::fprintf(stderr, "dtrain's kernel does not serve bf16 on this CPU (no native 16-bit block GEMM)\n");
      return 1;
    }
    std::vector<double> best(5, 1e30);
    const std::vector<std::function<void()>> runs = {[&] { aten_forward(in); }, [&] { ours_forward(in); }, [&] { aten_both(in); },
                                                     [&] { both(in, dtrain::FlashForward::Ours); },
                                                     [&] { both(in, dtrain::FlashForward::Fastest); }};
    for (int round = 0; round < rounds; ++round)
      for (size_t i = 0; i < runs.size(); ++i) best[i] = std::min(best[i], median_ms(runs[i], reps));
    std::printf("| %lld | %lld | %lld | %lld | %.2f | %.2f | %.2fx | %.2f | %.2f | %.2fx | %.2f | %.2fx |\n", (long long)s.B, (long long)s.H,
                (long long)s.T, (long long)s.hd, best[0], best[1], best[0] / best[1], best[2], best[3], best[2] / best[3], best[4],
                best[2] / best[4]);
    std::fflush(stdout);
  }
}
