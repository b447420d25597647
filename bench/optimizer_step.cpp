// One AdamW step over a whole model's flat fp32 buffer, as the trainer takes it (decay where
// FlatParameters says, one fused pass per run): the median step time over --steps steps after two
// untimed ones. --shapes writes the model's parameter shapes and which of them decay, so that
// bench/pytorch_adamw.py steps the same tensors with torch.optim.AdamW.
// Usage: build/bench_optimizer_step [--preset gpt2-124m] [--threads 1] [--steps 10] [--shapes FILE]
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <fstream>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/transformer.h"
#include "optim/flat_optimizer.h"
#include "optim/flat_parameters.h"

int main(int argc, char** argv) {
  std::string preset = "gpt2-124m", shapes;
  int threads = 1, steps = 10;
  CLI::App app{"Median time of one flat AdamW step over a model's parameters."};
  app.add_option("--preset", preset, "model.preset whose parameters are stepped")->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--steps", steps, "timed steps")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--shapes", shapes, "write the parameters' shapes and decay flags here (JSON)");
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;

  at::set_num_threads(threads);
  dtrain::Transformer model(dtrain::model_preset(preset), 1);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
  dtrain::FlatParameters flat(named);
  if (!shapes.empty()) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& e : flat.entries()) list.push_back({{"shape", e.param.sizes().vec()}, {"decay", e.decay}});
    std::ofstream(shapes) << list.dump();
  }
  flat.grad().copy_(torch::randn({flat.numel()}));
  auto optimizer = dtrain::make_flat_optimizer({{"type", "AdamW"}, {"params", {{"lr", 1e-3}, {"weight_decay", 0.1}}}}, flat.data());
  std::vector<double> ms;
  for (int i = 0; i < steps + 2; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    optimizer->step(flat.data(), flat.grad(), flat.decay_spans(), 1e-3, {});
    if (i >= 2) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  std::printf("%lld parameters, %d thread(s): median AdamW step %.1f ms\n", static_cast<long long>(flat.numel()), threads, ms[ms.size() / 2]);
  return 0;
}
