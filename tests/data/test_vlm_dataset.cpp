// The token row of a vision-language sample (data/vlm_row.h).
#include <gtest/gtest.h>

#include "data/vlm_row.h"

using namespace dtrain;

namespace {

constexpr int64_t kImage = 256, kEnd = 257, kNone = kIgnoredTarget;

}  // namespace

TEST(VlmRow, ImageTokensThenPromptThenTextThenEndWithLossOnTextAndEndOnly) {
  int64_t x[10], y[10];
  write_row({10, kImage, kEnd}, 3, {'a', 'b', 'x', 'y', 'z'}, 2, x, y);
  // Row: I I I a b x y z E E E (11 positions).
  EXPECT_EQ(std::vector<int64_t>(x, x + 10), (std::vector<int64_t>{kImage, kImage, kImage, 'a', 'b', 'x', 'y', 'z', kEnd, kEnd}));
  EXPECT_EQ(std::vector<int64_t>(y, y + 10), (std::vector<int64_t>{kNone, kNone, kNone, kNone, 'x', 'y', 'z', kEnd, kNone, kNone}));
}

TEST(VlmRow, WithoutImageOrPromptTheTextStartsTheRow) {
  int64_t x[8], y[8];
  write_row({8, kImage, kEnd}, 0, {'h', 'e', 'l', 'l', 'o'}, 0, x, y);
  EXPECT_EQ(std::vector<int64_t>(x, x + 8), (std::vector<int64_t>{'h', 'e', 'l', 'l', 'o', kEnd, kEnd, kEnd}));
  EXPECT_EQ(std::vector<int64_t>(y, y + 8), (std::vector<int64_t>{'e', 'l', 'l', 'o', kEnd, kNone, kNone, kNone}));
  // A sample that fills the row exactly: its end token is the last position, a target only.
  int64_t fx[4], fy[4];
  write_row({4, kImage, kEnd}, 1, {'p', 'q', 'r'}, 1, fx, fy);
  EXPECT_EQ(std::vector<int64_t>(fx, fx + 4), (std::vector<int64_t>{kImage, 'p', 'q', 'r'}));
  EXPECT_EQ(std::vector<int64_t>(fy, fy + 4), (std::vector<int64_t>{kNone, 'q', 'r', kEnd}));
  EXPECT_THROW(write_row({3, kImage, kEnd}, 1, {'p', 'q', 'r'}, 1, fx, fy), std::logic_error);
}
