// ckpt/async_checkpoint_writer.h: one background save at a time; its end, or its error, reaches
// the caller only when collected, and a failed save says so before it is collected (what the
// trainer reports as the cause when another error stops the rank first).
#include <gtest/gtest.h>

#include <future>
#include <stdexcept>
#include <string>
#include <thread>

#include "ckpt/async_checkpoint_writer.h"

using namespace dtrain;

namespace {

// Waits on the writer's own state: the save's thread has ended.
void wait_until_ended(const AsyncCheckpointWriter& writer) {
  while (writer.writing()) std::this_thread::yield();
}

// Starts a save of `step` that commits `dir` once `go` is set.
void start_held_save(AsyncCheckpointWriter& writer, int64_t step, const std::string& dir, std::promise<void>& go) {
  writer.start(step, [released = go.get_future().share(), dir] {
    released.wait();
    return dir;
  });
}

TEST(AsyncCheckpointWriter, ASaveThatEndsWellIsCollectedOnceWithItsDirectoryAndIsNotFailed) {
  AsyncCheckpointWriter writer;
  std::promise<void> go;
  start_held_save(writer, 4, "ckpt/step-00000004", go);
  EXPECT_TRUE(writer.writing());
  EXPECT_EQ(writer.collect(false), std::nullopt);  // still being written
  go.set_value();
  wait_until_ended(writer);
  EXPECT_FALSE(writer.failed());
  const auto written = writer.collect(false);
  ASSERT_TRUE(written.has_value());
  EXPECT_EQ(written->step, 4);
  EXPECT_EQ(written->dir, "ckpt/step-00000004");
  EXPECT_FALSE(writer.in_flight());
  EXPECT_EQ(writer.collect(true), std::nullopt);
}

TEST(AsyncCheckpointWriter, AFailedSaveIsFailedUntilCollectedAndCollectingRethrowsItsError) {
  AsyncCheckpointWriter writer;
  writer.start(6, []() -> std::string { throw std::runtime_error("no space left on device"); });
  wait_until_ended(writer);
  EXPECT_TRUE(writer.failed());
  try {
    writer.collect(false);
    ADD_FAILURE() << "collect returned instead of rethrowing the save's error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "no space left on device");
  }
  EXPECT_FALSE(writer.failed());
  EXPECT_FALSE(writer.in_flight());
}

TEST(AsyncCheckpointWriter, StartingWhileASaveIsInFlightIsRefusedNamingItsStep) {
  AsyncCheckpointWriter writer;
  std::promise<void> go;
  start_held_save(writer, 2, "ckpt/step-00000002", go);
  try {
    writer.start(4, [] { return std::string(); });
    ADD_FAILURE() << "a second save started while the first was in flight";
  } catch (const std::logic_error& e) {
    EXPECT_NE(std::string(e.what()).find("the save of step 2 is in flight"), std::string::npos) << e.what();
  }
  go.set_value();
  EXPECT_EQ(writer.collect(true)->dir, "ckpt/step-00000002");
}

}  // namespace
