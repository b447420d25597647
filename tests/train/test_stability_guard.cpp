// The stability guard's verdicts: non-finite steps are skipped and counted, spikes are judged
// against the mean of the recent accepted losses, and skipped losses never enter that mean.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "train/rank_log.h"
#include "train/stability_guard.h"

namespace dtrain {
namespace {

TEST(StabilityGuard, NonFiniteLossOrNormIsSkippedAndCounted) {
  StabilityGuard guard({});
  std::string why;
  EXPECT_EQ(guard.check(std::nan(""), 1.0, &why), StepVerdict::SkipNonFinite);
  EXPECT_NE(why.find("non-finite loss"), std::string::npos);
  EXPECT_EQ(guard.check(2.0, std::numeric_limits<double>::infinity(), &why), StepVerdict::SkipNonFinite);
  EXPECT_NE(why.find("gradient norm"), std::string::npos);
  EXPECT_EQ(guard.check(2.0, 1.0, &why), StepVerdict::Apply);
  EXPECT_TRUE(why.empty());
  EXPECT_EQ(guard.skipped_non_finite(), 2);
}

TEST(StabilityGuard, SpikeAboveFactorTimesRecentMeanIsSkippedWhenAsked) {
  StabilityGuard guard({/*spike_factor=*/2.0, /*window=*/5, /*skip_spikes=*/true});
  std::string why;
  for (int i = 0; i < 5; ++i) ASSERT_EQ(guard.check(1.0, 1.0, &why), StepVerdict::Apply);
  EXPECT_EQ(guard.check(1.9, 1.0, &why), StepVerdict::Apply);   // mean 1.0: 1.9 < 2.0
  EXPECT_EQ(guard.check(2.5, 1.0, &why), StepVerdict::SkipSpike);  // mean 1.18: 2.5 > 2.36
  EXPECT_NE(why.find("loss spike"), std::string::npos);
  EXPECT_EQ(guard.spikes(), 1);
  // The skipped 2.5 did not raise the mean: window holds 1,1,1,1,1.9 -> mean 1.18.
  EXPECT_EQ(guard.check(2.37, 1.0, &why), StepVerdict::SkipSpike);
}

TEST(StabilityGuard, SpikeIsOnlyReportedWhenNotSkipping) {
  StabilityGuard guard({2.0, 5, false});
  std::string why;
  for (int i = 0; i < 5; ++i) guard.check(1.0, 1.0, &why);
  EXPECT_EQ(guard.check(10.0, 1.0, &why), StepVerdict::Apply);
  EXPECT_NE(why.find("step applied"), std::string::npos);
  EXPECT_EQ(guard.spikes(), 1);
}

TEST(StabilityGuard, NoSpikeVerdictBeforeTheWindowHasSamples) {
  StabilityGuard guard({2.0, 50, true});
  std::string why;
  EXPECT_EQ(guard.check(1.0, 1.0, &why), StepVerdict::Apply);
  EXPECT_EQ(guard.check(100.0, 1.0, &why), StepVerdict::Apply);
}

TEST(FormatDuration, PicksUnits) {
  EXPECT_EQ(format_duration(42.2), "42s");
  EXPECT_EQ(format_duration(185), "3m05s");
  EXPECT_EQ(format_duration(3720), "1h02m");
  EXPECT_EQ(format_duration(-3), "0s");
}

}  // namespace
}  // namespace dtrain
