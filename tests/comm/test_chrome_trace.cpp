// A rank's timeline (comm/chrome_trace.h): what it gives back, and what keeping it costs the heap.
#include <gtest/gtest.h>
#include <malloc.h>

#include "comm/chrome_trace.h"

using namespace dtrain;

TEST(ChromeTrace, EventsComeBackInOrderOfTheirStartWithTheirArguments) {
  ChromeTrace trace;
  const auto t0 = ChromeTrace::Clock::time_point(std::chrono::microseconds(1000));
  trace.record("recv<-1 ring attention k/v step 0", "comm", t0 + std::chrono::microseconds(5), t0 + std::chrono::microseconds(9),
               {{"group", "cp"}, {"blocked_us", 1.5}});
  trace.record("F", "compute", t0, t0 + std::chrono::microseconds(20));
  const nlohmann::json events = trace.events();
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["name"], "F");
  EXPECT_EQ(events[0]["cat"], "compute");
  EXPECT_DOUBLE_EQ(events[0]["ts"].get<double>(), 1000.0);
  EXPECT_DOUBLE_EQ(events[0]["dur"].get<double>(), 20.0);
  EXPECT_FALSE(events[0].contains("args"));
  EXPECT_EQ(events[1]["name"], "recv<-1 ring attention k/v step 0");
  EXPECT_EQ(events[1]["args"], (nlohmann::json{{"group", "cp"}, {"blocked_us", 1.5}}));
}

// Traced ops are recorded in the middle of a step, between the allocation and the release of its
// large blocks. Kept as small heap blocks of their own, events split the holes those blocks leave,
// the next step's blocks no longer fit them, and the heap grows every step: by 20-25 MiB a step per
// rank on ring attention's 48 traced ops a step at seq 2048 (bench model, cp 2), which took a
// 16-step traced run's peak RSS from 585 to 940 MiB. Events go into the trace's own buffers instead.
TEST(ChromeTrace, RecordingKeepsNoHeapBlocksOfItsOwn) {
  ChromeTrace trace;
  const auto now = ChromeTrace::Clock::now();
  auto record = [&](int i) {
    trace.record("recv<-1 ring attention backward k/v step 0", "comm", now, now,
                 {{"group", "cp"}, {"blocked_us", 12.5}, {"label", "ring attention backward k/v step 0"}, {"seq", i}});
  };
  record(0);
  constexpr int kEvents = 1000;
  const size_t in_use = mallinfo2().uordblks;  // bytes of live heap blocks
  for (int i = 1; i <= kEvents; ++i) record(i);
  const size_t kept = mallinfo2().uordblks - in_use;
  EXPECT_LT(kept, size_t(1024)) << kEvents << " events kept " << kept << " bytes of heap blocks";
  EXPECT_EQ(trace.events().size(), size_t(kEvents + 1));
}
