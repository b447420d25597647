// The fp16 loss scaler against sequences of overflows (O) and clean steps (C) worked through by
// hand from DeepSpeed's DynamicLossScaler.update_scale.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "optim/loss_scaler.h"

using namespace dtrain;

namespace {

struct Case {
  std::string name;
  LossScalerOptions options;
  std::string steps;                 // O = overflow, C = clean
  std::vector<double> scales;        // the scale after each step
};

LossScalerOptions dynamic(int power, int64_t window, int hysteresis, bool consecutive) {
  LossScalerOptions o;
  o.initial_scale_power = power;
  o.window = window;
  o.hysteresis = hysteresis;
  o.consecutive_hysteresis = consecutive;
  return o;
}

}  // namespace

TEST(LossScaler, FollowsDeepSpeedsUpdateRuleStepByStep) {
  LossScalerOptions fixed;
  fixed.static_scale = 128;
  const std::vector<Case> cases = {
      // Two overflows spend the hysteresis and halve; a full window after the last overflow doubles
      // and restores the hysteresis, so the next overflow is tolerated again.
      {"hysteresis", dynamic(4, 4, 2, false), "OOCCCCOC", {16, 8, 8, 8, 8, 16, 16, 16}},
      // Without consecutive hysteresis a clean step does not restore it: the second and third
      // overflows both halve.
      {"spent hysteresis", dynamic(4, 4, 2, false), "OCOOCCCC", {16, 16, 8, 4, 4, 4, 4, 8}},
      // With it, a clean step restores it, so only the second of two adjacent overflows halves.
      {"consecutive hysteresis", dynamic(4, 4, 2, true), "OCOOCCCC", {16, 16, 16, 8, 8, 8, 8, 16}},
      // With no overflow yet, the window counts from before the first step.
      {"clean windows", dynamic(1, 3, 2, false), "CCCCCC", {2, 2, 4, 4, 4, 8}},
      {"static", fixed, "OCO", {128, 128, 128}},
  };
  for (const auto& c : cases) {
    LossScaler scaler(c.options);
    int64_t skipped = 0;
    for (size_t i = 0; i < c.steps.size(); ++i) {
      const bool overflow = c.steps[i] == 'O';
      EXPECT_EQ(scaler.update(overflow), overflow) << c.name << " step " << i;
      skipped += overflow;
      EXPECT_EQ(scaler.scale(), c.scales[i]) << c.name << " step " << i;
    }
    EXPECT_EQ(scaler.skipped_steps(), skipped) << c.name;
  }
}

TEST(LossScaler, OverflowingAtTheMinimumScaleStopsWithDeepSpeedsMessage) {
  LossScalerOptions o = dynamic(1, 1000, 1, false);
  o.min_scale = 1;
  LossScaler scaler(o);
  EXPECT_TRUE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 1);
  try {
    scaler.update(true);
    FAIL() << "a second overflow at the minimum scale was accepted";
  } catch (const LossScaleAtMinimum& e) {
    EXPECT_NE(std::string(e.what()).find("Current loss scale already at minimum - cannot decrease scale anymore"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("fp16.min_loss_scale"), std::string::npos) << e.what();
  }
}

TEST(LossScaler, ResumingFromItsStateContinuesExactlyAsWithoutTheInterruption) {
  const LossScalerOptions o = dynamic(4, 4, 2, false);
  const std::string steps = "OCCOCCCCOOCCCCC";
  LossScaler whole(o), first(o);
  for (size_t i = 0; i < steps.size(); ++i) whole.update(steps[i] == 'O');
  for (size_t i = 0; i < 7; ++i) first.update(steps[i] == 'O');
  LossScaler resumed(o);
  resumed.load_state(nlohmann::json::parse(first.state().dump()));
  for (size_t i = 7; i < steps.size(); ++i) resumed.update(steps[i] == 'O');
  EXPECT_EQ(resumed.state(), whole.state());
}
