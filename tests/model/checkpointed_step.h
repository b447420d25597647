// A training step of the tiny model for the activation checkpointing tests, in one process or on
// each rank of a group: two micro-batches accumulated, as a training step does, from the same
// tokens wherever it runs, with what autograd and the activation store held in between.
#pragma once
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/function.h>
#include <torch/types.h>

#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/activation_checkpoint.h"
#include "model/loss.h"
#include "model/transformer.h"

namespace dtrain::test {

struct StepSetup {
  StepSetup(std::string arch, std::string mode, bool frozen_embeddings = false, at::ScalarType precision = at::kFloat,
            ActivationStoreOptions store = {}, std::shared_ptr<Group> partition_group = nullptr)
      : arch(std::move(arch)), mode(std::move(mode)), frozen_embeddings(frozen_embeddings), precision(precision), store(store),
        partition_group(std::move(partition_group)) {}

  std::string arch;                // gpt2 or llama
  std::string mode;                // train.activation_checkpointing
  bool frozen_embeddings;          // the first block's input then requires no gradient, though its parameters do
  at::ScalarType precision;
  ActivationStoreOptions store;            // how checkpointed block inputs are kept
  std::shared_ptr<Group> partition_group;  // what store.partition splits over
};

struct StepResult {
  at::Tensor loss;
  std::vector<std::pair<std::string, at::Tensor>> grads;
  int checkpointed_segments = 0;  // in the first micro-batch's graph
  int64_t held_after_forward = 0;   // elements the activation store kept after the first forward pass
  int64_t held_after_backward = 0;  // and after its backward
  int64_t buffer_numel = 0;         // of the store's contiguous buffer
  int64_t block_input_numel = 0;    // of one block's input
};

// How many recomputed segments backward will pass through: nodes of the checkpoint function.
inline int checkpoint_nodes(const at::Tensor& loss) {
  std::vector<torch::autograd::Node*> todo{loss.grad_fn().get()};
  std::set<torch::autograd::Node*> seen;
  int found = 0;
  while (!todo.empty()) {
    auto* node = todo.back();
    todo.pop_back();
    if (!node || !seen.insert(node).second) continue;
    if (node->name().find("CheckpointFunction") != std::string::npos) ++found;
    for (const auto& edge : node->next_edges()) todo.push_back(edge.function.get());
  }
  return found;
}

inline StepResult checkpointed_step(const StepSetup& s) {
  TransformerConfig c = model_preset("tiny");
  c.arch = s.arch;
  if (s.arch == "llama") c.n_head = 4, c.n_kv_head = 2;
  Transformer m(c, 11);
  ActivationCheckpointing ac = ActivationCheckpointing::parse(s.mode);
  ac.store = s.store;
  m->set_activation_checkpointing(ac);
  if (s.partition_group) m->set_activation_partition_group(s.partition_group);
  m->set_precision(MixedPrecision::make(s.precision, at::Device(at::kCPU)));
  if (s.frozen_embeddings)
    for (auto& p : m->named_parameters())
      if (p.key().rfind("wte.", 0) == 0 || p.key().rfind("wpe.", 0) == 0) p.value().requires_grad_(false);
  auto held = [&] { return m->activation_store() ? m->activation_store()->held_elements() : 0; };
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  StepResult r;
  r.loss = at::zeros({});
  const int64_t batch = 3;
  r.block_input_numel = batch * c.seq_len * c.d_model;
  for (int micro = 0; micro < 2; ++micro) {
    auto tokens = at::randint(0, c.vocab_size, {batch, c.seq_len + 1}, gen, at::kLong);
    auto loss = next_token_loss(m->forward(tokens.narrow(1, 0, c.seq_len)), tokens.narrow(1, 1, c.seq_len));
    if (micro == 0) {
      r.checkpointed_segments = checkpoint_nodes(loss);
      r.held_after_forward = held();
    }
    loss.backward();
    if (micro == 0) r.held_after_backward = held();
    r.loss += loss.detach();
  }
  if (m->activation_store() && m->activation_store()->buffer().defined()) r.buffer_numel = m->activation_store()->buffer().numel();
  for (const auto& p : m->named_parameters())
    if (p.value().requires_grad()) r.grads.emplace_back(p.key(), p.value().grad().clone());
  return r;
}

// Whether two steps' losses and every gradient are the same bits; what differs is in `why`.
inline bool same_bits(const StepResult& a, const StepResult& b, std::string& why) {
  if (!at::equal(a.loss, b.loss)) return why = "losses differ", false;
  if (a.grads.size() != b.grads.size()) return why = "gradient counts differ", false;
  for (size_t i = 0; i < a.grads.size(); ++i) {
    if (!b.grads[i].second.defined()) return why = a.grads[i].first + ": no gradient", false;
    if (!at::equal(a.grads[i].second, b.grads[i].second))
      return why = a.grads[i].first + ": max difference " +
                   std::to_string((a.grads[i].second - b.grads[i].second).abs().max().item<double>()),
             false;
  }
  return true;
}

}  // namespace dtrain::test
