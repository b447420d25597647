// Activation checkpointing recomputes the same operations in the same order, so losses and gradients
// must match the run that keeps every activation bit for bit, in every mode and both architectures.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/csrc/autograd/function.h>
#include <torch/types.h>

#include <set>

#include "model/activation_checkpoint.h"
#include "model/loss.h"
#include "model/transformer.h"

using namespace dtrain;

namespace {

struct Result {
  at::Tensor loss;
  std::vector<std::pair<std::string, at::Tensor>> grads;
  int checkpointed_segments = 0;  // in the first micro-batch's graph
};

// How many recomputed segments backward will pass through: nodes of the checkpoint function.
int checkpoint_nodes(const at::Tensor& loss) {
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

// Two micro-batches accumulated, as a training step does. With `frozen_embeddings` the first
// block's input requires no gradient, though its parameters do. In 16 bits the recomputation rounds
// the same values in the same places, so it too must match bit for bit.
Result step(const std::string& arch, const std::string& mode, bool frozen_embeddings, at::ScalarType precision) {
  TransformerConfig c = model_preset("tiny");
  c.arch = arch;
  if (arch == "llama") c.n_head = 4, c.n_kv_head = 2;
  Transformer m(c, 11);
  m->set_activation_checkpointing(ActivationCheckpointing::parse(mode));
  m->set_precision(MixedPrecision::make(precision, at::Device(at::kCPU)));
  if (frozen_embeddings)
    for (auto& p : m->named_parameters())
      if (p.key().rfind("wte.", 0) == 0 || p.key().rfind("wpe.", 0) == 0) p.value().requires_grad_(false);
  auto gen = at::make_generator<at::CPUGeneratorImpl>(5);
  Result r;
  r.loss = at::zeros({});
  for (int micro = 0; micro < 2; ++micro) {
    auto tokens = at::randint(0, c.vocab_size, {3, c.seq_len + 1}, gen, at::kLong);
    auto loss = next_token_loss(m->forward(tokens.narrow(1, 0, c.seq_len)), tokens.narrow(1, 1, c.seq_len));
    if (micro == 0) r.checkpointed_segments = checkpoint_nodes(loss);
    loss.backward();
    r.loss += loss.detach();
  }
  for (const auto& p : m->named_parameters())
    if (p.value().requires_grad()) r.grads.emplace_back(p.key(), p.value().grad().clone());
  return r;
}

}  // namespace

class ActivationCheckpointingModes : public ::testing::TestWithParam<std::string> {};

TEST_P(ActivationCheckpointingModes, LossAndEveryGradientMatchKeepingAllActivationsBitForBit) {
  struct Case {
    std::string arch;
    bool frozen;
    at::ScalarType precision;
  };
  for (const auto& [arch, frozen, precision] : std::vector<Case>{{"gpt2", false, at::kFloat},
                                                                 {"llama", false, at::kFloat},
                                                                 {"gpt2", true, at::kFloat},
                                                                 {"gpt2", false, at::kBFloat16},
                                                                 {"llama", false, at::kHalf}}) {
    const Result kept = step(arch, "none", frozen, precision), recomputed = step(arch, GetParam(), frozen, precision);
    // The tiny model has 2 blocks: full and selective recompute a segment in each, every:2 in block 0.
    EXPECT_EQ(kept.checkpointed_segments, 0);
    EXPECT_EQ(recomputed.checkpointed_segments, GetParam() == "every:2" ? 1 : 2) << arch;
    EXPECT_TRUE(at::equal(kept.loss, recomputed.loss)) << arch << (frozen ? " frozen " : " ") << precision_name(precision);
    ASSERT_EQ(kept.grads.size(), recomputed.grads.size());
    for (size_t i = 0; i < kept.grads.size(); ++i) {
      ASSERT_TRUE(recomputed.grads[i].second.defined()) << arch << " " << kept.grads[i].first;
      EXPECT_TRUE(at::equal(kept.grads[i].second, recomputed.grads[i].second))
          << arch << " " << kept.grads[i].first << ": max difference "
          << (kept.grads[i].second - recomputed.grads[i].second).abs().max().item<double>();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Modes, ActivationCheckpointingModes, ::testing::Values("full", "selective", "every:2"),
                         [](const auto& info) {
                           std::string name = info.param;
                           return name.substr(0, name.find(':'));
                         });

// A segment that draws random numbers draws the same ones when recomputed, so backward sees the
// values forward used (dropout would otherwise get a different mask).
TEST(ActivationCheckpoint, RecomputationReplaysTheRandomNumbersOfTheForwardPass) {
  at::manual_seed(3);
  auto x = at::randn({64}).requires_grad_(true);
  auto noisy = [](const std::vector<at::Tensor>& in) { return in[0] * at::rand_like(in[0]); };
  at::manual_seed(9);
  auto kept = noisy({x});
  kept.sum().backward();
  const at::Tensor expected = x.grad().clone();
  x.mutable_grad().reset();
  at::manual_seed(9);
  auto recomputed = checkpoint(noisy, {x});
  at::rand({5});  // the generator moves on before backward
  recomputed.sum().backward();
  EXPECT_TRUE(at::equal(kept, recomputed));
  EXPECT_TRUE(at::equal(x.grad(), expected));
}

TEST(ActivationCheckpoint, ModesParseAndBadOnesAreNamed) {
  EXPECT_EQ(ActivationCheckpointing::parse("every:3").every, 3);
  EXPECT_TRUE(ActivationCheckpointing::parse("every:3").whole_block(3));
  EXPECT_FALSE(ActivationCheckpointing::parse("every:3").whole_block(4));
  EXPECT_TRUE(ActivationCheckpointing::parse("selective").attention_core());
  for (const std::string bad : {"all", "every:", "every:0", "every:2x", "Full"}) {
    try {
      ActivationCheckpointing::parse(bad);
      ADD_FAILURE() << bad << " was accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("'" + bad + "'"), std::string::npos) << e.what();
    }
  }
}
