// The suite's scratch directories: a test process that passed removes what it made under the temp
// dir; one that failed keeps it. `make test` used to leave a directory behind for every test process.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "support/process.h"
#include "support/scratch.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

std::string this_binary() { return fs::read_symlink("/proc/self/exe").string(); }

// Run only as a child of the test below, which names it: it writes a file and fails.
TEST(Scratch, DISABLED_FailsAfterWritingIntoItsScratchDirectory) {
  std::ofstream(scratch_dir("failing") + "/kept") << "look at me";
  FAIL() << "on purpose";
}

TEST(Scratch, DISABLED_PassesAfterWritingIntoItsScratchDirectory) {
  std::ofstream(scratch_dir("passing") + "/removed") << "done";
}

bool holds_anything(const std::string& dir) { return fs::exists(dir) && !fs::is_empty(dir); }

TEST(Scratch, APassingProcessRemovesItsScratchAndAFailingOneKeepsIt) {
  for (const bool passes : {true, false}) {
    const std::string tmp = scratch_dir(passes ? "tmp_passing" : "tmp_failing");
    const ProcessResult r =
        run_process({this_binary(), "--gtest_also_run_disabled_tests",
                     std::string("--gtest_filter=Scratch.DISABLED_") + (passes ? "Passes" : "Fails") + "AfterWritingIntoItsScratchDirectory"},
                    60, {"TMPDIR=" + tmp});
    EXPECT_EQ(r.exit_code, passes ? 0 : 1) << r.output;
    EXPECT_EQ(holds_anything(tmp), !passes) << r.output;
  }
}

}  // namespace
}  // namespace dtrain::test
