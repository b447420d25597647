// A block's residual add, its output layer's bias and the norm that follows, forward and backward:
// the fused kernel (model/fused/residual_norm.h) against the ATen ops it replaced (the linear's bias
// add in the compute type, the fp32 residual add, at::layer_norm or RMSNorm's five ops, and the bias
// gradient's sum), alternating, --rounds rounds of --repeats calls each; the median per call.
// Usage: build/bench_residual_norm [--tokens 2048] [--features 384] [--threads 2] [--rounds 7] [--repeats 20]
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <functional>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/fused/residual_norm.h"

int main(int argc, char** argv) {
  int64_t tokens = 2048, features = 384;
  int threads = 2, rounds = 7, repeats = 20;
  CLI::App app{"The fused residual add + bias + norm against ATen's ops, forward and backward, bf16 product."};
  app.add_option("--tokens", tokens, "rows")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--features", features, "the model's width")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--rounds", rounds, "rounds, each running every side")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--repeats", repeats, "calls per side and round")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;

  at::set_num_threads(threads);
  torch::manual_seed(1);
  const at::Tensor x = at::randn({tokens, features}).requires_grad_();
  const at::Tensor y = at::randn({tokens, features}).to(at::kBFloat16).requires_grad_();
  const at::Tensor b = (at::randn({features}) * 0.1).requires_grad_();
  const at::Tensor w = at::ones({features}).requires_grad_(), nb = at::zeros({features}).requires_grad_();
  const at::Tensor gh = at::randn({tokens, features}), gn = at::randn({tokens, features});
  auto step = [&](const at::Tensor& h, const at::Tensor& n) { ((h * gh).sum() + (n * gn).sum()).backward(); };
  struct Side {
    const char* name;
    std::function<void()> run;
    std::vector<double> ms{};
  };
  std::vector<Side> sides;
  for (const bool rms : {false, true}) {
    const dtrain::NormParams norm{rms, w, rms ? at::Tensor() : nb, 1e-5};
    sides.push_back({rms ? "RMSNorm, ATen ops" : "LayerNorm, ATen ops", [&, norm, rms] {
                       const at::Tensor h = x + (y + b.to(at::kBFloat16));
                       step(h, rms ? h * at::rsqrt(h.pow(2).mean(-1, true) + 1e-5) * w : at::layer_norm(h, {features}, w, nb, 1e-5));
                     }});
    sides.push_back({rms ? "RMSNorm, fused" : "LayerNorm, fused", [&, norm] {
                       const auto out = dtrain::add_residual_and_norm({x, y, b}, norm);
                       step(out.residual, out.normed);
                     }});
  }
  // The loss's own products and sums are the same on both sides; measured apart, to subtract.
  sides.push_back({"the loss alone (Σ h·gh + Σ n·gn and its backward)", [&] {
                     const at::Tensor h = x * 1.0f, n = x * 1.0f;
                     step(h, n);
                   }});
  for (int round = 0; round < rounds + 1; ++round)  // the first round warms up, untimed
    for (Side& side : sides) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < repeats; ++i) side.run();
      if (round > 0) side.ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() / repeats);
    }
  std::printf("[%ld, %ld], product bf16, %d thread(s), %d rounds of %d calls\n| path | median ms per call (forward + backward) |\n|---|---:|\n",
              long(tokens), long(features), threads, rounds, repeats);
  for (Side& side : sides) {
    std::sort(side.ms.begin(), side.ms.end());
    std::printf("| %s | %.3f |\n", side.name, side.ms[side.ms.size() / 2]);
  }
  return 0;
}
