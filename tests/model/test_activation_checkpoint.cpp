// Activation checkpointing recomputes the same operations in the same order, so losses and gradients
// must match the run that keeps every activation bit for bit, in every mode and both architectures.
#include <gtest/gtest.h>

#include "checkpointed_step.h"

using namespace dtrain;
using namespace dtrain::test;

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
    const StepResult kept = checkpointed_step({arch, "none", frozen, precision}),
                     recomputed = checkpointed_step({arch, GetParam(), frozen, precision});
    // The tiny model has 2 blocks: full and selective recompute a segment in each, every:2 in block 0.
    EXPECT_EQ(kept.checkpointed_segments, 0);
    EXPECT_EQ(recomputed.checkpointed_segments, GetParam() == "every:2" ? 1 : 2) << arch;
    std::string why;
    EXPECT_TRUE(same_bits(kept, recomputed, why)) << arch << (frozen ? " frozen " : " ") << precision_name(precision) << ": " << why;
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
