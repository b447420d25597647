// Deferred weight gradients (model/weight_grad_store.h): the backward under a guard leaves the
// linear layers' weight gradients to the store, and running it gives the same bits as the backward
// without one.
#include <gtest/gtest.h>
#include <torch/types.h>

#include <map>

#include "model/loss.h"
#include "model/transformer.h"
#include "model/weight_grad_store.h"

using namespace dtrain;

namespace {

TransformerConfig small(const std::string& arch, bool tied) {
  TransformerConfig c = model_preset("tiny");
  c.arch = arch;
  c.tie_embeddings = tied;
  if (arch == "llama") c.n_head = 4, c.n_kv_head = 2;
  return c;
}

struct TokenBatch {
  at::Tensor tokens, targets;
};

std::vector<TokenBatch> batches(int n) {
  torch::manual_seed(17);
  std::vector<TokenBatch> out;
  for (int k = 0; k < n; ++k) out.push_back({torch::randint(0, 256, {2, 16}, torch::kLong), torch::randint(0, 256, {2, 16}, torch::kLong)});
  return out;
}

// Forward and backward of each batch in turn, gradients accumulating; with `store`, each backward
// (and its forward, as a pipeline runs them) under a guard, and the store run after it.
void passes(Transformer& m, const std::vector<TokenBatch>& bs, WeightGradStore* store) {
  for (const TokenBatch& b : bs) {
    std::optional<DeferWeightGrads> guard;
    if (store) guard.emplace(*store);
    next_token_loss(m->forward(b.tokens), b.targets).backward();
    guard.reset();
    if (store) store->run();
  }
}

// Each parameter's .grad() a view into one zeroed buffer, as the trainer's flat gradients are.
at::Tensor flat_grads(Transformer& m) {
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  at::Tensor flat = at::zeros({n});
  int64_t offset = 0;
  for (auto& p : m->parameters()) {
    p.mutable_grad() = flat.narrow(0, offset, p.numel()).view(p.sizes());
    offset += p.numel();
  }
  return flat;
}

void expect_same_grads(Transformer& a, Transformer& b, const std::string& what) {
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& item : pa) {
    ASSERT_TRUE(item.value().grad().defined()) << what << ": " << item.key();
    EXPECT_TRUE(torch::equal(item.value().grad(), pb[item.key()].grad())) << what << ": " << item.key();
  }
}

}  // namespace

TEST(WeightGradStore, DeferredGradientsAreTheUndeferredBits) {
  for (const std::string arch : {"gpt2", "llama"}) {
    for (bool tied : {true, false}) {
      const std::string what = arch + (tied ? " tied" : " untied");
      Transformer plain(small(arch, tied), 3), deferred(small(arch, tied), 3);
      WeightGradStore store;
      passes(plain, batches(1), nullptr);
      passes(deferred, batches(1), &store);
      EXPECT_TRUE(store.empty());
      expect_same_grads(plain, deferred, what);
    }
  }
}

TEST(WeightGradStore, AccumulatesInPlaceIntoFlatGradientsOverMicroBatches) {
  // Untied: a weight with two gradient paths rounds its sum in another order (weight_grad_store.h).
  Transformer plain(small("llama", false), 4), deferred(small("llama", false), 4);
  flat_grads(plain);
  const at::Tensor flat = flat_grads(deferred);
  std::map<std::string, void*> storage;
  for (const auto& item : deferred->named_parameters()) storage[item.key()] = item.value().grad().data_ptr();
  WeightGradStore store;
  passes(plain, batches(3), nullptr);
  passes(deferred, batches(3), &store);
  expect_same_grads(plain, deferred, "3 micro-batches");
  for (const auto& item : deferred->named_parameters()) EXPECT_EQ(item.value().grad().data_ptr(), storage[item.key()]) << item.key();
  EXPECT_GT(flat.abs().sum().item<double>(), 0.0);
}

TEST(WeightGradStore, MixedPrecisionAndRecomputedBlocksDeferToo) {
  for (const std::string mode : {"bf16", "full"}) {
    Transformer plain(small("gpt2", false), 5), deferred(small("gpt2", false), 5);
    for (Transformer* m : {&plain, &deferred}) {
      if (mode == "bf16") {
        (*m)->set_precision(MixedPrecision::make(at::kBFloat16, at::kCPU));
      } else {
        (*m)->set_activation_checkpointing(ActivationCheckpointing::parse("full"));
      }
    }
    WeightGradStore store;
    passes(plain, batches(2), nullptr);
    passes(deferred, batches(2), &store);
    expect_same_grads(plain, deferred, mode);
  }
}

TEST(WeightGradStore, WithoutRunTheLinearWeightsHaveNoGradient) {
  Transformer m(small("gpt2", false), 6);
  WeightGradStore store;
  {
    DeferWeightGrads guard(store);
    EXPECT_THROW(DeferWeightGrads{store}, std::logic_error);
    const TokenBatch b = batches(1)[0];
    next_token_loss(m->forward(b.tokens), b.targets).backward();
  }
  EXPECT_EQ(store.size(), m->matmul_layers().size());
  for (const Linear& layer : m->matmul_layers()) {
    EXPECT_FALSE(layer->weight.grad().defined());
    if (layer->bias.defined()) EXPECT_TRUE(layer->bias.grad().defined());
  }
  EXPECT_TRUE(m->named_parameters()["wte.weight"].grad().defined());
  store.run();
  for (const Linear& layer : m->matmul_layers()) EXPECT_TRUE(layer->weight.grad().defined());
  // The guard is gone: the next backward computes its weight gradients itself.
  const TokenBatch b = batches(1)[0];
  next_token_loss(m->forward(b.tokens), b.targets).backward();
  EXPECT_TRUE(store.empty());
}
