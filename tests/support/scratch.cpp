#include "support/scratch.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace dtrain::test {
namespace {

std::filesystem::path scratch_root() {
  return std::filesystem::temp_directory_path() / ("dtrain_test_" + std::to_string(::getpid()));
}

// A test process that passed removes what it made; one that failed keeps it to be looked at.
class RemoveScratchWhenPassed : public ::testing::EmptyTestEventListener {
  void OnTestProgramEnd(const ::testing::UnitTest& unit) override {
    if (!unit.Passed()) return;
    std::error_code ignored;
    std::filesystem::remove_all(scratch_root(), ignored);
  }
};

}  // namespace

std::string scratch_dir(const std::string& name) {
  static const bool cleanup_registered = [] {
    ::testing::UnitTest::GetInstance()->listeners().Append(new RemoveScratchWhenPassed);  // gtest owns it
    return true;
  }();
  (void)cleanup_registered;
  const auto dir = scratch_root() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

}  // namespace dtrain::test
