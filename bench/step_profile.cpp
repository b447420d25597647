// Where a training step's time goes, by kind of work: ATen's profiler records every operator of a step
// (the trainer's: the working copies refreshed, forward, loss, backward, the gradient norm and the
// optimizer's update, which clips the gradients and zeroes them for the next step, without data
// loading or logging), each operator's self time (its time less that of the operators it calls) is
// given to a kind, and the kinds are summed over the profiled steps. An operator inside attention, a
// norm, the loss or a GEMM belongs to that kind whatever it is (the copies a GEMM makes of its
// operands are the GEMM's); elsewhere casts, adds and sums are told apart by name and shapes. Time on
// the step's thread outside any operator (autograd's engine, the model's own code) is "outside
// operators". The GEMM rate is the model's matmul FLOPs (TransformerConfig::train_flops_per_token)
// over the time of the GEMM and attention kinds.
// Usage: build/bench_step_profile [--config bench/gpt_bench.json] [--precision bf16] [--threads 2]
//        [--steps 6] [--warmup 3] [--by-shape]
#include <CLI/CLI.hpp>
#include <torch/csrc/autograd/profiler_kineto.h>
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

namespace profiler = torch::autograd::profiler;
using Event = profiler::KinetoEvent;

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// The kind an enclosing operator gives everything inside it, or "" when it gives none.
std::string enclosing_kind(const std::string& name) {
  if (contains(name, "dtrain::optimizer")) return "optimizer (zero, clip, AdamW)";
  if (contains(name, "dtrain::refresh_working_copy")) return "casts: weights to working copies";
  if (contains(name, "flash_attention") || contains(name, "scaled_dot_product")) return "attention (flash kernel)";
  if (contains(name, "layer_norm") || contains(name, "rms_norm")) return "norms";
  if (contains(name, "dtrain::residual_norm")) return "residual + bias adds and norms (fused)";
  if (contains(name, "cross_entropy") || contains(name, "log_softmax") || contains(name, "nll_loss")) return "softmax + cross-entropy";
  if (contains(name, "gelu")) return "GELU";
  if (name == "dtrain::sum_over_tokens") return "bias gradients (sums over tokens)";
  if (contains(name, "embedding")) return "embedding";
  if (name == "aten::matmul" || name == "aten::mm" || name == "aten::addmm" || name == "aten::linear" || name == "aten::bmm" ||
      contains(name, "mkldnn") || name == "aten::_addmm_activation")
    return "GEMM";
  return "";
}

std::string shapes_text(const Event& e) {
  std::string out;
  for (const auto& shape : e.shapes()) out += (out.empty() ? "" : " ") + c10::str(shape);
  return out;
}

// The kind of an operator's own time where nothing around it gave one; `by_shape` splits casts and
// adds by their operands' shapes.
std::string own_kind(const Event& e, bool by_shape) {
  const std::string name = e.name();
  const std::string shapes = by_shape ? " " + shapes_text(e) : "";
  if (name == "aten::to" || name == "aten::_to_copy" || name == "aten::copy_") return "casts and copies" + shapes;
  if (name == "aten::add" || name == "aten::add_") {
    return (e.shapes().size() >= 2 && e.shapes()[1].size() == 1 ? "bias adds" : "residual and gradient adds") + shapes;
  }
  if (name == "aten::sum") return "bias gradients (sums over tokens)" + shapes;
  if (name == "aten::mul" || name == "aten::div" || name == "aten::neg" || name == "aten::fill_" || name == "aten::zero_" ||
      name == "aten::zeros" || name == "aten::empty" || name == "aten::empty_strided" || name == "aten::ones_like" ||
      name == "aten::zeros_like" || name == "aten::empty_like")
    return "other elementwise and allocation (" + name + ")";
  if (name.rfind("aten::", 0) == 0) return "other operators (" + name + ")";
  return "other (" + name + ")";
}

// Self time per kind, in ns, over events of the step's thread; `outside` gets the step scopes' self time.
std::map<std::string, double> kinds(const std::vector<Event>& events, uint64_t thread, bool by_shape) {
  std::vector<const Event*> mine;
  for (const auto& e : events)
    if (e.startThreadId() == thread && e.deviceType() == c10::DeviceType::CPU) mine.push_back(&e);
  std::sort(mine.begin(), mine.end(), [](const Event* a, const Event* b) {
    return a->startNs() != b->startNs() ? a->startNs() < b->startNs() : a->endNs() > b->endNs();
  });
  struct Open {
    const Event* e;
    double children = 0;
    std::string kind;
  };
  std::map<std::string, double> out;
  std::vector<Open> stack;
  auto close = [&] {
    Open o = stack.back();
    stack.pop_back();
    const double own = double(o.e->durationNs()) - o.children;
    const std::string name = o.e->name();
    out[!o.kind.empty() ? o.kind : name == "dtrain::step" ? "outside operators (autograd engine, model code)" : own_kind(*o.e, by_shape)] += own;
    if (!stack.empty()) stack.back().children += double(o.e->durationNs());
  };
  for (const Event* e : mine) {
    while (!stack.empty() && stack.back().e->endNs() <= e->startNs()) close();
    std::string kind = stack.empty() ? "" : stack.back().kind;
    if (kind.empty()) kind = enclosing_kind(e->name());
    stack.push_back({e, 0, kind});
  }
  while (!stack.empty()) close();
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::string config_path = "bench/gpt_bench.json", precision = "bf16";
  int threads = 2, steps = 6, warmup = 3;
  bool by_shape = false;
  CLI::App app{"A training step's time by kind of work, from ATen's profiler."};
  app.add_option("--config", config_path, "training config whose model and micro-batch are profiled")->capture_default_str();
  app.add_option("--precision", precision, "fp32 | bf16 | fp16")->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "fp16"}));
  app.add_option("--threads", threads, "intra-op threads")->capture_default_str()->check(dtrain::whole_number(1, 1024));
  app.add_option("--steps", steps, "profiled steps")->capture_default_str()->check(dtrain::whole_number(1, INT_MAX));
  app.add_option("--warmup", warmup, "unprofiled steps first")->capture_default_str()->check(dtrain::whole_number(0, INT_MAX));
  app.add_flag("--by-shape", by_shape, "split casts, adds and sums by their operands' shapes");
  if (const auto code = dtrain::parse_command_line(app, argc, argv)) return *code;
  const dtrain::TrainConfig config = load_bench_config(config_path, "bench_step_profile");
  BenchStep bench(config, precision, threads, at::Device(at::kCPU));
  dtrain::Transformer& model = bench.model;

  auto step = [&] {
    RECORD_USER_SCOPE("dtrain::step");
    {
      RECORD_USER_SCOPE("dtrain::refresh_working_copy");
      model->refresh_working_copy();
    }
    dtrain::next_token_loss(model->forward(bench.tokens), bench.targets).backward();
    {
      RECORD_USER_SCOPE("dtrain::optimizer");
      bench.update();
    }
  };
  for (int i = 0; i < warmup; ++i) step();
  using torch::profiler::impl::ActivityType;
  const torch::profiler::impl::ProfilerConfig profile_config(torch::profiler::impl::ProfilerState::KINETO, /*report_input_shapes=*/true);
  profiler::prepareProfiler(profile_config, {ActivityType::CPU});
  profiler::enableProfiler(profile_config, {ActivityType::CPU});
  const uint64_t thread = at::RecordFunction::currentThreadId();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) step();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto result = profiler::disableProfiler();

  const auto by_kind = kinds(result->events(), thread, by_shape);
  double total = 0;
  for (const auto& [kind, ns] : by_kind) total += ns;
  std::vector<std::pair<double, std::string>> rows;
  for (const auto& [kind, ns] : by_kind) rows.emplace_back(ns, kind);
  std::sort(rows.rbegin(), rows.rend());
  const auto& m = config.model;
  const double step_ms = wall / steps * 1e3, tokens_per_step = double(config.micro_batch * m.seq_len);
  std::printf("model: %s %d layers, d_model %ld, seq %ld, micro-batch %ld; %s; %d thread(s); %d profiled steps of %.1f ms (%.0f tokens/s)\n",
              m.arch.c_str(), m.n_layer, long(m.d_model), long(m.seq_len), long(config.micro_batch), bench.mp.describe().c_str(), threads,
              steps, step_ms, tokens_per_step / (wall / steps));
  std::printf("| kind | ms per step | share |\n|---|---:|---:|\n");
  for (const auto& [ns, kind] : rows)
    if (ns / total >= 0.001) std::printf("| %s | %.2f | %.1f%% |\n", kind.c_str(), ns / steps / 1e6, 100 * ns / total);
  const double matmul_ns = by_kind.count("GEMM") ? by_kind.at("GEMM") + by_kind.at("attention (flash kernel)") : 0;
  const double model_flops = m.train_flops_per_token() * tokens_per_step * steps;
  std::printf("matmul FLOPs %.1f G per step; their rate within GEMM + attention time %.1f GFLOP/s; over the whole step %.1f GFLOP/s (%.0f%%)\n",
              model_flops / steps / 1e9, model_flops / matmul_ns, model_flops / wall / 1e9, 100 * matmul_ns / total);
  return 0;
}
