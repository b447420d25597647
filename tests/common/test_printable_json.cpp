#include <gtest/gtest.h>

#include "common/printable_json.h"

using dtrain::printable_json;

TEST(PrintableJson, AValueIsQuotedAsJsonWithControlsEscaped) {
  EXPECT_EQ(printable_json(nlohmann::json("fast")), "\"fast\"");
  EXPECT_EQ(printable_json(nlohmann::json(1e30)), "1e+30");
  EXPECT_EQ(printable_json(nlohmann::json("\x1b[2J")), "\"\\u001b[2J\"");
}

TEST(PrintableJson, BytesThatAreNotUtf8AreReplacedWhereDumpWouldThrow) {
  const nlohmann::json bad("a\xff");
  EXPECT_THROW(bad.dump(), nlohmann::json::type_error);
  EXPECT_EQ(printable_json(bad), "\"a\xef\xbf\xbd\"");  // U+FFFD
}
