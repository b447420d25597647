// The built-in OCR set's pieces: lines chosen from the corpus (data/ocr_lines.h), rendered through
// FreeType (data/text_line_renderer.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/ocr_lines.h"
#include "data/text_line_renderer.h"
#include "support/scratch.h"
#include "vlm_test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// A renderer is a few hundred glyphs rasterised; one serves every test.
const TextLineRenderer& renderer() {
  static const TextLineRenderer r;
  return r;
}

}  // namespace

TEST(TextLineRenderer, TheSameLineAndSeedGiveTheSamePixels) {
  const Image a = renderer().render("The quick brown fox", 7);
  const Image b = renderer().render("The quick brown fox", 7);
  EXPECT_EQ(a.channels, 1);
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.height, b.height);
  EXPECT_EQ(a.pixels, b.pixels);
  EXPECT_NE(renderer().render("The quick brown fox", 8).pixels, a.pixels);
  const ImageSize measured = renderer().measure("The quick brown fox", 7);
  EXPECT_EQ(measured.width, a.width);
  EXPECT_EQ(measured.height, a.height);
}

TEST(TextLineRenderer, LinesHaveInkOnPaperAndDifferInSize) {
  const Image image = renderer().render("Ink on paper", 3);
  const LineStyle style = line_style(3);
  const auto [darkest, lightest] = std::minmax_element(image.pixels.begin(), image.pixels.end());
  EXPECT_LE(int(*darkest), style.ink + style.noise + 40) << "the glyphs' cores are near the ink's grey";
  EXPECT_GE(int(*lightest), style.paper - style.noise) << "the margins are paper";
  EXPECT_GT(renderer().measure("a much longer line of text", 3).width, renderer().measure("short", 3).width);
  std::set<std::pair<int, int>> sizes;
  for (uint64_t seed = 0; seed < 12; ++seed) {
    const ImageSize s = renderer().measure("Same words", seed);
    sizes.insert({s.width, s.height});
  }
  EXPECT_GE(sizes.size(), 6u) << "the style a seed picks changes the line's size";
}

TEST(TextLineRenderer, AMissingFontIsNamedAndNonAsciiIsRefused) {
  try {
    TextLineRenderer missing("/nonexistent/fonts/DejaVuSans.ttf");
    FAIL() << "a missing font was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("font '/nonexistent/fonts/DejaVuSans.ttf' does not exist"), std::string::npos) << e.what();
  }
  const std::string dir = scratch_dir("vlm_font");
  write_text(dir + "/broken.ttf", "not a font");
  try {
    TextLineRenderer broken(dir + "/broken.ttf");
    FAIL() << "a file that is no font was accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("broken.ttf' cannot be read by FreeType"), std::string::npos) << e.what();
  }
  EXPECT_THROW(renderer().render("caf\xc3\xa9", 1), std::invalid_argument);
}

TEST(OcrLines, KeepsLinesThatReadAsTextOnce) {
  const std::string text =
      "  A line   with\tspaces  \n"        // kept, whitespace collapsed
      "tiny\n"                             // too short
      "a line far too long for the bounds that are set here\n"
      "caf\xc3\xa9 au lait, s'il vous plait\n"  // not ASCII
      "----====----====\n"                 // a rule, no letters
      "A line   with spaces\n"             // the first line again once collapsed
      "Second good line.";
  EXPECT_EQ(ocr_lines(text, {8, 40}), (std::vector<std::string>{"A line with spaces", "Second good line."}));
}
