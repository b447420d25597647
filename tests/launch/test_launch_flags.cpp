// The launcher's flags, parsed without starting anything: every bad number is refused in words.
#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include "launch/launch_options.h"

namespace dtrain {
namespace {

// What parsing `flag value` says; "" when accepted.
std::string flag_error(const std::string& flag, const std::string& value) {
  CLI::App app;
  LaunchOptions o;
  add_launch_flags(app, o);
  std::vector<std::string> args{value, flag};  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

TEST(LaunchFlags, NegativeCountsAreRefusedWithTheirBoundInWords) {
  EXPECT_EQ(flag_error("--max-restarts", "-1"), "--max-restarts: must be at least 0, got -1");
  EXPECT_EQ(flag_error("--max-restarts", "99999999999"), "--max-restarts: must be at most 2147483647, got 99999999999");
  EXPECT_EQ(flag_error("--node-rank", "-1"), "--node-rank: must be between 0 and 99999, got -1");
  EXPECT_EQ(flag_error("--max-restarts", "3"), "");
}

TEST(LaunchFlags, TimesMustBeFiniteAndAtMostAYear) {
  for (const char* flag : {"--rdzv-timeout", "--heartbeat-timeout"}) {
    for (const char* value : {"0", "-1", "nan", "inf", "1e99"})
      EXPECT_EQ(flag_error(flag, value), std::string(flag) + ": must be more than 0 and at most 31536000, got " + value);
    EXPECT_EQ(flag_error(flag, "0.5"), "");
  }
  EXPECT_EQ(flag_error("--grace-period", "nan"), "--grace-period: must be between 0 and 31536000, got nan");
  EXPECT_EQ(flag_error("--grace-period", "0"), "");
}

}  // namespace
}  // namespace dtrain
