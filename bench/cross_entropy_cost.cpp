// The loss of one micro-batch's logits, forward and backward: the fused softmax cross-entropy
// (model/fused/softmax_cross_entropy.h) against ATen's cross_entropy on the logits widened to fp32
// (the loss before it), alternating, --rounds rounds. Per side: the median time and the peak of
// resident memory above what was resident before (the logits and targets exist already; the
// gradient of the logits, in their type, is counted), read from VmHWM after resetting it.
// Usage: build/bench_cross_entropy [--rows 2048] [--vocab 50257] [--precision bf16] [--threads 2] [--rounds 5]
#include <CLI/CLI.hpp>
#include <torch/nn/functional/loss.h>
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <fstream>
#include <string>

#include "common/flag_bounds.h"
#include "common/parse_command_line.h"
#include "model/fused/softmax_cross_entropy.h"

namespace {

// A field of /proc/self/status, in KiB.
long status_kib(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

void reset_peak_rss() { std::ofstream("/proc/self/clear_refs") << "5"; }

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 2048, vocab = 50257;
  std::string precision = "bf16";
  int threads = 2, rounds = 5;
  CLI::App app{"The fused softmax cross-entropy against ATen's, forward and backward: time and peak memory."};
  app.add_option("--rows", rows, "tokens (rows of logits)")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--vocab", vocab, "vocabulary (columns)")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--precision", precision, "the logits' type: fp32 | bf16 | fp16")->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--rounds", rounds, "rounds, each running both")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;
  const at::ScalarType dtype = precision == "bf16" ? at::kBFloat16 : precision == "fp16" ? at::kHalf : at::kFloat;

  at::set_num_threads(threads);
  torch::manual_seed(1);
  const at::Tensor logits = (at::randn({rows, vocab}) * 3).to(dtype).requires_grad_();
  const at::Tensor targets = at::randint(vocab, {rows}, at::TensorOptions().dtype(at::kLong));
  struct Side {
    const char* name;
    std::function<at::Tensor()> loss;
    std::vector<double> ms{};
    long peak_kib = 0;
  };
  Side sides[] = {{"ATen cross_entropy on fp32-widened logits", [&] { return torch::nn::functional::cross_entropy(logits.to(at::kFloat), targets); }, {}, 0},
                  {"fused softmax cross-entropy", [&] { return dtrain::fused_cross_entropy(logits, targets); }, {}, 0}};
  for (int round = 0; round < rounds + 1; ++round)  // the first round warms up, untimed
    for (Side& side : sides) {
      logits.mutable_grad() = at::Tensor();
      const long before = status_kib("VmRSS");
      reset_peak_rss();
      const auto t0 = std::chrono::steady_clock::now();
      side.loss().backward();
      const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
      if (round == 0) continue;
      side.ms.push_back(ms);
      side.peak_kib = std::max(side.peak_kib, status_kib("VmHWM") - before);
    }
  const double logits_mib = double(logits.numel() * logits.element_size()) / (1 << 20);
  std::printf("logits [%ld, %ld] %s (%.0f MiB), %d thread(s), %d rounds\n", long(rows), long(vocab), precision.c_str(), logits_mib, threads, rounds);
  std::printf("| loss | median ms (forward + backward) | peak MiB above the logits |\n|---|---:|---:|\n");
  for (Side& side : sides) {
    std::sort(side.ms.begin(), side.ms.end());
    std::printf("| %s | %.1f | %.0f |\n", side.name, side.ms[side.ms.size() / 2], side.peak_kib / 1024.0);
  }
  return 0;
}
