// ckpt/crash_points.h: an armed entry kills its own process with SIGKILL at its point and step, and
// nowhere else; the config's entries and DTRAIN_CRASH_AT's are one list. Each case runs in a child
// process (a death test), which the kill ends.
#include <gtest/gtest.h>

#include <signal.h>

#include <cstdlib>

#include "ckpt/crash_points.h"

using namespace dtrain;

namespace {

// The child of these tests is rank 0 of round 0: RANK and DTRAIN_RESTART_COUNT are unset.
TEST(CrashPoints, AnArmedEntryKillsAtItsPointAndStepOnly) {
  EXPECT_EXIT(
      {
        arm_crash_points({CrashAt{"backward", 3, 0, 0}});
        crash_point("backward", 2);
        crash_point("forward", 3);
        crash_point("backward", 3);
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "");
}

TEST(CrashPoints, EntriesOfAnotherRoundOrRankDoNotFire) {
  EXPECT_EXIT(
      {
        arm_crash_points({CrashAt{"backward", 3, 1, 0}, CrashAt{"backward", 3, 0, 1}});
        if (crash_point_due("backward", 3)) std::exit(1);
        crash_point("backward", 3);
        std::exit(7);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(CrashPoints, TheEnvironmentFormIsTheSameEntry) {
  EXPECT_EQ((CrashAt{"save", 4, 2, 1}.entry()), "save:4:2:1");
  EXPECT_EXIT(
      {
        ::setenv("DTRAIN_CRASH_AT", "step:9:0:0,save:4:0:0", 1);
        crash_point("save", 3);
        crash_point("save", 4);
        std::exit(0);
      },
      ::testing::KilledBySignal(SIGKILL), "");
}

}  // namespace
