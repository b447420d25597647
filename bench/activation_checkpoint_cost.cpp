// What activation checkpointing costs in step time, measured where a shared machine's noise cannot
// decide it: one process builds the config's model once and alternates the modes step by step
// (none, selective, every:2, full, none, ...), so a slow spell hits every mode within seconds of
// the others. A step is the trainer's: zeroed flat gradients, the working copy refreshed, forward,
// backward, clipping and the optimizer's update on the flat buffer (no data loading, no logging).
// The cost of a mode is the median over rounds of its step time divided by the same round's `none`.
// Usage: build/bench_activation_checkpointing [--config bench/gpt_bench.json] [--precision bf16]
//        [--threads 2] [--rounds 15]
#include <CLI/CLI.hpp>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <iostream>
#include <map>

#include "bench_config.h"
#include "bench_step.h"
#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/loss.h"
#include "model/transformer.h"
#include "train/train_config.h"

namespace {

using dtrain::ActivationCheckpointing;

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = "bench/gpt_bench.json", precision = "fp32", device_name = "cpu";
  std::vector<std::string> modes{"none", "selective", "every:2", "full"};
  int threads = 2, rounds = 15, warmup = 2;
  CLI::App app{"Activation checkpointing's step-time cost against none, modes interleaved step by step."};
  app.add_option("--config", config_path, "training config whose model and micro-batch are measured")->capture_default_str();
  app.add_option("--precision", precision, "fp32 | bf16 | fp16")->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--device", device_name, "cpu | cuda")->capture_default_str();
  app.add_option("--modes", modes, "modes, in the order they alternate (none is put first when missing)")->delimiter(',')->capture_default_str();
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--rounds", rounds, "timed rounds")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--warmup", warmup, "untimed rounds first")->capture_default_str()->check(dtrain::whole_number(0, INT_MAX));
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;

  std::vector<ActivationCheckpointing> acs;
  try {
    if (std::find(modes.begin(), modes.end(), "none") == modes.end()) modes.insert(modes.begin(), "none");
    for (const auto& m : modes) acs.push_back(ActivationCheckpointing::parse(m));
  } catch (const std::exception& e) {
    std::cerr << "bench_activation_checkpointing: error: --modes " << e.what() << "\n";
    return 2;
  }
  const dtrain::TrainConfig config = load_bench_config(config_path, "bench_activation_checkpointing");
  const at::Device device = [&] {
    try {
      return at::Device(device_name);
    } catch (const std::exception&) {
      std::cerr << "bench_activation_checkpointing: error: --device '" << device_name << "' is not a device (cpu, cuda, cuda:1)\n";
      std::exit(2);
    }
  }();
  BenchStep bench(config, precision, threads, device);
  dtrain::Transformer& model = bench.model;

  std::map<std::string, std::vector<double>> seconds, forward_seconds;
  for (int round = 0; round < warmup + rounds; ++round) {
    for (size_t i = 0; i < acs.size(); ++i) {
      model->set_activation_checkpointing(acs[i]);
      bench.flat->zero_grad();
      model->refresh_working_copy();
      if (device.is_cuda()) torch::cuda::synchronize();
      const auto t0 = std::chrono::steady_clock::now();
      auto loss = dtrain::next_token_loss(model->forward(bench.tokens), bench.targets);
      if (device.is_cuda()) torch::cuda::synchronize();
      const auto t1 = std::chrono::steady_clock::now();
      loss.backward();
      bench.update();
      if (device.is_cuda()) torch::cuda::synchronize();
      const auto t2 = std::chrono::steady_clock::now();
      if (round >= warmup) {
        seconds[modes[i]].push_back(std::chrono::duration<double>(t2 - t0).count());
        forward_seconds[modes[i]].push_back(std::chrono::duration<double>(t1 - t0).count());
      }
    }
    if (round >= warmup) std::fprintf(stderr, "round %d of %d\n", round - warmup + 1, rounds);
  }

  const auto& m = config.model;
  std::printf("model: %d layers, d_model %ld, %d heads, seq %ld, micro-batch %ld; %s (%s); %d thread(s); %d rounds\n",
              m.n_layer, long(m.d_model), m.n_head, long(m.seq_len), long(config.micro_batch), precision.c_str(),
              bench.mp.describe().c_str(), threads, rounds);
  std::printf("| activation checkpointing | forward (s) | step (s) | vs none (median of rounds) | fastest and slowest round |\n");
  std::printf("|---|---:|---:|---:|---:|\n");
  const auto& base = seconds["none"];
  for (const auto& mode : modes) {
    const auto& t = seconds[mode];
    std::vector<double> ratio;
    for (size_t r = 0; r < t.size(); ++r) ratio.push_back(t[r] / base[r]);
    std::printf("| %s | %.3f | %.3f | %.3fx | %.2fx - %.2fx |\n", mode.c_str(), median(forward_seconds[mode]), median(t), median(ratio),
                *std::min_element(ratio.begin(), ratio.end()), *std::max_element(ratio.begin(), ratio.end()));
  }
  return 0;
}
