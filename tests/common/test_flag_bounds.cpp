#include <gtest/gtest.h>

#include <climits>

#include "common/flag_bounds.h"

using namespace dtrain;

namespace {

// What parsing `--flag value` into an int64 (or, with `as_int`, an int) says; "" when accepted.
std::string error_of(const CLI::Validator& check, const std::string& value, bool as_int = false) {
  CLI::App app;
  int64_t wide = 0;
  int narrow = 0;
  if (as_int) {
    app.add_option("--flag", narrow)->check(check);
  } else {
    app.add_option("--flag", wide)->check(check);
  }
  std::vector<std::string> args{value, "--flag"};  // CLI11 takes them last first
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

std::string real_error_of(const CLI::Validator& check, const std::string& value) {
  CLI::App app;
  double x = 0;
  app.add_option("--flag", x)->check(check);
  std::vector<std::string> args{value, "--flag"};
  try {
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(FlagBounds, WholeNumbersSayTheRangeInWords) {
  EXPECT_EQ(error_of(whole_number(0), "7"), "");
  EXPECT_EQ(error_of(whole_number(0), "-1"), "--flag: must be at least 0, got -1");
  EXPECT_EQ(error_of(whole_number(1, 4096), "0"), "--flag: must be between 1 and 4096, got 0");
  EXPECT_EQ(error_of(whole_number(0), "1.5"), "--flag: must be a whole number, at least 0, got '1.5'");
  EXPECT_EQ(error_of(whole_number(0), "ten"), "--flag: must be a whole number, at least 0, got 'ten'");
  EXPECT_EQ(error_of(whole_number(0), "99999999999999999999"), "--flag: must be at most 9223372036854775807, got 99999999999999999999");
  EXPECT_EQ(error_of(whole_number(0), "-99999999999999999999"), "--flag: must be at least 0, got -99999999999999999999");
}

TEST(FlagBounds, AnIntFlagIsRefusedInWordsBeforeCli11CannotConvertIt) {
  EXPECT_EQ(error_of(whole_number(0, INT_MAX), "2147483647", true), "");
  EXPECT_EQ(error_of(whole_number(0, INT_MAX), "99999999999", true), "--flag: must be at most 2147483647, got 99999999999");
}

TEST(FlagBounds, RealNumbersMustBeFiniteAndInRange) {
  EXPECT_EQ(real_error_of(real_number(0), "0.8"), "");
  EXPECT_EQ(real_error_of(real_number(0), "-1"), "--flag: must be at least 0, got -1");
  EXPECT_EQ(real_error_of(real_number(0), "nan"), "--flag: must be at least 0, got nan");
  EXPECT_EQ(real_error_of(real_number(0), "inf"), "--flag: must be at least 0, got inf");
  EXPECT_EQ(real_error_of(real_number(0, 300, true), "0"), "--flag: must be more than 0 and at most 300, got 0");
  EXPECT_EQ(real_error_of(real_number(0, 300, true), "1e999"), "--flag: must be more than 0 and at most 300, got 1e999");
  EXPECT_EQ(real_error_of(real_number(0), "fast"), "--flag: must be a number, at least 0, got 'fast'");
}

TEST(FlagBounds, TheValueInTheMessageIsPrintable) {
  EXPECT_EQ(error_of(whole_number(0), "\x1b[2J"), "--flag: must be a whole number, at least 0, got '\\x1b[2J'");
}
