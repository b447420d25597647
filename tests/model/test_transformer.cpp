#include <gtest/gtest.h>
#include <torch/types.h>

#include <cmath>

#include "model/loss.h"
#include "model/sampling.h"
#include "model/transformer.h"
#include "support/error_of.h"

using namespace dtrain;

namespace {

TransformerConfig small(const std::string& arch) {
  TransformerConfig c = model_preset("tiny");
  c.arch = arch;
  if (arch == "llama") c.n_head = 4, c.n_kv_head = 2;
  return c;
}

int64_t counted(Transformer& m) {
  int64_t n = 0;
  for (const auto& p : m->parameters()) n += p.numel();
  return n;
}

}  // namespace

TEST(TransformerConfig, ParameterCountMatchesTheModelForEveryArchTiedAndUntied) {
  for (const std::string arch : {"gpt2", "llama", "vlm"}) {
    for (bool tied : {true, false}) {
      auto c = arch == "vlm" ? model_preset("vlm-ocr") : small(arch);
      c.tie_embeddings = tied;
      Transformer m(c, 0);
      EXPECT_EQ(counted(m), c.parameter_count()) << arch << " tied=" << tied;
    }
  }
}

TEST(TransformerConfig, PresetsHaveTheirPublishedSizes) {
  EXPECT_EQ(model_preset("gpt2-124m").parameter_count(), 124439808);  // GPT-2 small with tied embeddings
  const auto llama = model_preset("llama-1b");
  EXPECT_NEAR(double(llama.parameter_count()), 1.2358e9, 0.001e9);     // Llama 3.2 1B
  EXPECT_THROW(model_preset("gpt5"), std::invalid_argument);
}

TEST(TransformerConfig, ValidateNamesTheKeyAtFault) {
  auto c = small("gpt2");
  c.d_model = 30;
  c.n_head = 4;
  try {
    c.validate();
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("model.d_model"), std::string::npos) << e.what();
  }
}

TEST(TransformerConfig, ShapesTooLargeToCountAreRefusedBeforeTheirSizesOverflow) {
  auto message = [](const TransformerConfig& c) { return error_of([&] { c.validate(); }); };
  auto c = small("gpt2");
  c.n_head = 1;
  c.d_model = 2000000000;  // ff_dim() = 4·d_model wrapped to -589934592
  EXPECT_EQ(message(c), "model.d_model (2000000000) must be at most 268435455");
  c.d_model = 200000000;
  c.n_layer = 2000000000;  // parameter_count() wrapped
  EXPECT_EQ(message(c), "model.n_layer, model.d_model, model.d_ff, model.vocab_size and model.seq_len give 9.6e+26 parameters, "
                        "more than a 64-bit count holds");
}

TEST(Transformer, FutureTokensDoNotChangeEarlierLogits) {
  for (const std::string arch : {"gpt2", "llama"}) {
    Transformer m(small(arch), 3);
    auto tokens = torch::randint(0, 256, {2, 16}, torch::kLong);
    auto changed = tokens.clone();
    changed.narrow(1, 10, 6).fill_(7);
    auto a = m->forward(tokens), b = m->forward(changed);
    EXPECT_TRUE(torch::allclose(a.narrow(1, 0, 10), b.narrow(1, 0, 10), 1e-6, 1e-6)) << arch;
    EXPECT_FALSE(torch::allclose(a.narrow(1, 10, 6), b.narrow(1, 10, 6))) << arch;
  }
}

TEST(Transformer, InitialisationFollowsGpt2AndDependsOnlyOnTheSeed) {
  auto c = small("gpt2");
  c.n_layer = 8;
  c.d_model = 128;
  Transformer a(c, 11), b(c, 11), other(c, 12);
  const auto pa = a->named_parameters(), pb = b->named_parameters(), po = other->named_parameters();
  for (const auto& item : pa) {
    EXPECT_TRUE(torch::equal(item.value(), pb[item.key()])) << item.key();
  }
  EXPECT_FALSE(torch::equal(pa["wte.weight"], po["wte.weight"]));
  EXPECT_NEAR(pa["blocks.0.q_proj.weight"].std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(pa["blocks.0.up_proj.weight"].std().item<double>(), 0.02, 0.001);
  EXPECT_NEAR(pa["blocks.3.o_proj.weight"].std().item<double>(), 0.02 / std::sqrt(16.0), 0.0003);
  EXPECT_NEAR(pa["blocks.3.down_proj.weight"].std().item<double>(), 0.02 / std::sqrt(16.0), 0.0003);
  EXPECT_EQ(pa["blocks.0.q_proj.bias"].abs().sum().item<double>(), 0.0);
  EXPECT_EQ(pa["ln_f.weight"].mean().item<double>(), 1.0);
  // Each parameter draws from a stream of its own: no two matrices start alike.
  EXPECT_FALSE(torch::equal(pa["blocks.0.q_proj.weight"], pa["blocks.0.k_proj.weight"]));
  EXPECT_FALSE(torch::equal(pa["blocks.0.q_proj.weight"], pa["blocks.1.q_proj.weight"]));
}

TEST(Transformer, LossAtInitIsNearUniform) {
  Transformer m(small("llama"), 5);
  auto tokens = torch::randint(0, 256, {4, 16}, torch::kLong), targets = torch::randint(0, 256, {4, 16}, torch::kLong);
  EXPECT_NEAR(next_token_loss(m->forward(tokens), targets).item<double>(), std::log(256.0), 0.1);
}

TEST(Sampling, GreedyIsDeterministicAndSeededSamplingRepeats) {
  Transformer m(small("gpt2"), 1);
  SamplingOptions greedy;
  greedy.new_tokens = 20;
  greedy.temperature = 0;
  EXPECT_EQ(sample_tokens(m, {65, 66}, greedy), sample_tokens(m, {65, 66}, greedy));
  SamplingOptions seeded;
  seeded.new_tokens = 40;  // longer than seq_len: the context window slides
  seeded.seed = 9;
  const auto once = sample_tokens(m, {65}, seeded);
  EXPECT_EQ(once.size(), 40u);
  EXPECT_EQ(once, sample_tokens(m, {65}, seeded));
  EXPECT_THROW(sample_tokens(m, {300}, seeded), std::invalid_argument);
}

TEST(Sampling, ATinyTemperatureSamplesTheLikeliestTokenInsteadOfNaN) {
  Transformer m(small("gpt2"), 1);
  SamplingOptions greedy, tiny;
  greedy.new_tokens = tiny.new_tokens = 10;
  greedy.temperature = 0;
  tiny.temperature = 1e-320;  // raw logits divided by it overflow to inf, and softmax to NaN
  EXPECT_EQ(sample_tokens(m, {65}, tiny), sample_tokens(m, {65}, greedy));
}
