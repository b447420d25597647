// What the bench programs that time the trainer's step build, as the trainer does (without data
// loading and logging): its allocator setting and threads, the config's model on `device` in the
// precision named (fp32, bf16 or fp16), its parameters in one flat buffer with the configured
// optimizer over it, and a micro-batch of random tokens and targets.
#pragma once
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "model/mixed_precision.h"
#include "model/transformer.h"
#include "optim/flat_optimizer.h"
#include "optim/flat_parameters.h"
#include "optim/grad_clip.h"
#include "train/host_memory.h"
#include "train/train_config.h"

struct BenchStep {
  BenchStep(const dtrain::TrainConfig& config, const std::string& precision, int threads, const at::Device& device)
      : config(config), model(nullptr) {
    dtrain::keep_freed_host_memory();  // the trainer's allocator setting
    at::set_num_threads(threads);
    torch::manual_seed(config.seed);
    model = dtrain::Transformer(config.model, config.seed);
    model->to(device);
    const at::ScalarType compute = precision == "bf16" ? at::kBFloat16 : precision == "fp16" ? at::kHalf : at::kFloat;
    mp = dtrain::MixedPrecision::make(compute, device);
    model->set_precision(mp);
    std::vector<std::pair<std::string, at::Tensor>> named;
    for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
    flat = std::make_unique<dtrain::FlatParameters>(named);
    optimizer = dtrain::make_flat_optimizer(config.optimizer, flat->data());
    const auto opts = at::TensorOptions().dtype(at::kLong).device(device);
    tokens = at::randint(config.model.vocab_size, {config.micro_batch, config.model.seq_len}, opts);
    targets = at::randint(config.model.vocab_size, {config.micro_batch, config.model.seq_len}, opts);
  }

  // The step's end, after backward: the gradient norm, and the optimizer's update, which clips the
  // gradients and leaves them zero for the next step, as the trainer's does under data parallelism.
  void update() {
    const double norm = dtrain::global_grad_norm(flat->grad());
    optimizer->step(flat->data(), flat->grad(), flat->decay_spans(), optimizer->base_lr(),
                    {dtrain::clip_factor(norm, config.gradient_clipping), /*zero_after=*/true});
  }

  const dtrain::TrainConfig& config;
  dtrain::Transformer model;
  dtrain::MixedPrecision mp;
  std::unique_ptr<dtrain::FlatParameters> flat;
  std::unique_ptr<dtrain::ElementwiseOptimizer> optimizer;
  at::Tensor tokens, targets;
};
