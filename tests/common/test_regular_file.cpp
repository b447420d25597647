#include <gtest/gtest.h>

#include <sys/stat.h>

#include <fstream>

#include "common/regular_file.h"
#include "support/scratch.h"

using dtrain::read_regular_file;

TEST(RegularFile, AFileIsReadWholeEvenWhenEmptyOrBinary) {
  const std::string dir = dtrain::test::scratch_dir("regular_file");
  const std::string bytes("a\0b\xff", 4);
  std::ofstream(dir + "/data", std::ios::binary) << bytes;
  std::ofstream(dir + "/empty");
  auto f = read_regular_file(dir + "/data");
  EXPECT_EQ(f.problem, "");
  EXPECT_EQ(f.bytes, bytes);
  f = read_regular_file(dir + "/empty");
  EXPECT_EQ(f.problem, "");
  EXPECT_EQ(f.bytes, "");
}

TEST(RegularFile, WhatIsNotARegularFileIsNamedWithoutOpeningIt) {
  const std::string dir = dtrain::test::scratch_dir("not_regular");
  ASSERT_EQ(::mkfifo((dir + "/fifo").c_str(), 0600), 0);  // opening it would block: the test would hang
  std::ofstream(dir + "/file") << "x";
  EXPECT_EQ(read_regular_file(dir + "/missing").problem, "does not exist");
  EXPECT_EQ(read_regular_file(dir + "/file/below").problem, "does not exist (a part of its path is not a directory)");
  EXPECT_EQ(read_regular_file(dir).problem, "is a directory");
  EXPECT_EQ(read_regular_file(dir + "/fifo").problem, "is a FIFO, not a regular file");
  EXPECT_EQ(read_regular_file("/dev/zero").problem, "is a device, not a regular file");  // would never end
}
