#include <gtest/gtest.h>

#include <string>

#include "common/printable.h"

using dtrain::printable;

TEST(Printable, PlainTextAndWellFormedUtf8PassUnchanged) {
  EXPECT_EQ(printable("train.steps"), "train.steps");
  EXPECT_EQ(printable("d × n ≤ 64, naïve, 😀"), "d × n ≤ 64, naïve, 😀");
  EXPECT_EQ(printable(""), "");
}

TEST(Printable, ControlCharactersBecomeHexEscapes) {
  EXPECT_EQ(printable("\x1b[2Jred"), "\\x1b[2Jred");
  EXPECT_EQ(printable("a\nb\tc\rd"), "a\\x0ab\\x09c\\x0dd");
  EXPECT_EQ(printable(std::string("nul\0byte", 8)), "nul\\x00byte");
  EXPECT_EQ(printable("del\x7f"), "del\\x7f");
  EXPECT_EQ(printable("csi\xc2\x9b" "2J"), "csi\\xc2\\x9b2J");  // U+009B, a C1 control
  EXPECT_EQ(printable("nbsp\xc2\xa0"), "nbsp\xc2\xa0");        // U+00A0, the first character after them
}

TEST(Printable, BytesThatAreNotUtf8BecomeHexEscapes) {
  EXPECT_EQ(printable("\xff\xfe"), "\\xff\\xfe");
  EXPECT_EQ(printable("cut \xe2\x82"), "cut \\xe2\\x82");        // a sequence that ends early
  EXPECT_EQ(printable("\xc0\xaf"), "\\xc0\\xaf");                // overlong '/'
  EXPECT_EQ(printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");       // a UTF-16 surrogate
  EXPECT_EQ(printable("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");  // above U+10FFFF
  EXPECT_EQ(printable("\xc2"), "\\xc2");                         // a lead byte at the very end
}

TEST(Printable, LongTextIsCutAtACharacterWithTheRestCounted) {
  EXPECT_EQ(printable(std::string(10, 'a'), 10), "aaaaaaaaaa");
  EXPECT_EQ(printable(std::string(1000, 'a'), 10), "aaaaaaaaaa... (990 more bytes)");
  EXPECT_EQ(printable("abcdefgh\x1b", 10), "abcdefgh... (1 more byte)");  // an escape is never split
  EXPECT_EQ(printable("abcdefghi×", 10), "abcdefghi... (2 more bytes)");   // nor a character
  EXPECT_EQ(printable(std::string(300, 'x')).size(), 200 + std::string("... (100 more bytes)").size());
}
