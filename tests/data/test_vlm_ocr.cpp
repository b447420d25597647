// The built-in OCR set: lines chosen from the corpus (data/ocr_lines.h), rendered through FreeType
// (data/text_line_renderer.h), split into training and held-out lines (data/ocr_set.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "data/ocr_lines.h"
#include "data/text_line_renderer.h"
#include "data/vlm_dataset.h"
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

// Options for rows of byte tokens beside small rendered lines: 8-pixel patches, 2x2 merging.
VlmDataOptions ocr_options(int seq_len) {
  VlmDataOptions o;
  o.row.seq_len = seq_len;
  o.image = {8, 2, 64, 48, 3};
  o.val_fraction = 0.25;
  return o;
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

TEST(OcrSet, HeldOutLinesAreNeverTrainedOnAndTheSplitIsFixed) {
  const std::string dir = scratch_dir("vlm_ocr_corpus");
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "Line number " + std::to_string(i) + " of the set\n%\n";
  write_text(dir + "/lines", corpus);
  FortunesDir fortunes(dir);
  const auto a = load_vlm_dataset("ocr", ocr_options(128));
  const auto b = load_vlm_dataset("ocr", ocr_options(128));
  ASSERT_EQ(a->size(Split::Train), 30);
  ASSERT_EQ(a->size(Split::Validation), 10);
  std::set<std::string> train, held_out;
  for (int64_t i = 0; i < a->size(Split::Train); ++i) train.insert(a->sample(Split::Train, i).text);
  for (int64_t i = 0; i < a->size(Split::Validation); ++i) {
    held_out.insert(a->sample(Split::Validation, i).text);
    EXPECT_EQ(a->sample(Split::Validation, i).text, b->sample(Split::Validation, i).text) << "the split moved between loads";
  }
  EXPECT_EQ(train.size(), 30u);
  EXPECT_EQ(held_out.size(), 10u);
  for (const auto& line : held_out) EXPECT_EQ(train.count(line), 0u) << line;
  // The held-out lines are not simply the corpus's last ones.
  int last_ten = 0;
  for (int i = 30; i < 40; ++i) last_ten += int(held_out.count("Line number " + std::to_string(i) + " of the set"));
  EXPECT_LT(last_ten, 10);
}

// Random lines (data.ocr_random_lines) join the training lines only: the held-out lines stay the
// ones a set without them holds, and each random line reads as the corpus lines do.
TEST(OcrSet, RandomLinesAreTrainedOnOnlyAndLeaveTheHeldOutLinesAsTheyWere) {
  const std::string dir = scratch_dir("vlm_ocr_random");
  std::string corpus;
  for (int i = 0; i < 40; ++i) corpus += "Line number " + std::to_string(i) + " of the set\n%\n";
  write_text(dir + "/lines", corpus);
  FortunesDir fortunes(dir);
  VlmDataOptions with_random = ocr_options(128);
  with_random.ocr_random_lines = 25;
  const auto plain = load_vlm_dataset("ocr", ocr_options(128));
  const auto mixed = load_vlm_dataset("ocr", with_random);
  ASSERT_EQ(mixed->size(Split::Train), 30 + 25);
  ASSERT_EQ(mixed->size(Split::Validation), 10);
  for (int64_t i = 0; i < 10; ++i) EXPECT_EQ(mixed->sample(Split::Validation, i).text, plain->sample(Split::Validation, i).text);
  std::set<std::string> corpus_lines;
  for (int i = 0; i < 40; ++i) corpus_lines.insert("Line number " + std::to_string(i) + " of the set");
  int random = 0;
  for (int64_t i = 0; i < mixed->size(Split::Train); ++i) {
    const std::string& text = mixed->sample(Split::Train, i).text;
    if (corpus_lines.count(text)) continue;
    ++random;
    EXPECT_TRUE(text.size() == 24 || text.size() == 25) << text;  // the corpus lines' lengths
    EXPECT_NE(text.front(), ' ');
    EXPECT_NE(text.back(), ' ');
    EXPECT_EQ(text.find("  "), std::string::npos) << text;
    for (const char c : text) EXPECT_NE(std::string(" Lineumbrofthst0123456789").find(c), std::string::npos) << text;
  }
  EXPECT_EQ(random, 25);
  EXPECT_NE(mixed->description().find("and 25 lines of random characters (training only)"), std::string::npos) << mixed->description();
}

TEST(OcrSet, ABatchHoldsEachLineAsImageTokensThenItsText) {
  const std::string dir = scratch_dir("vlm_ocr_batch");
  write_text(dir + "/lines", "Reading is fun\nAnother longer line here\nThe third one\nAnd a fourth line\n");
  FortunesDir fortunes(dir);
  const VlmDataOptions options = ocr_options(96);
  const auto data = load_vlm_dataset("ocr", options);
  const Batch batch = data->batch(Split::Train, {0, 1, 2});
  ASSERT_EQ(batch.images.count(), 3);
  int64_t patch_rows = 0;
  for (int64_t r = 0; r < 3; ++r) {
    const VlmSample& s = data->sample(Split::Train, r);
    const int64_t tokens = (s.grid.height / 2) * (s.grid.width / 2);
    EXPECT_EQ(batch.images.grids[r][0].item<int64_t>(), s.grid.height);
    EXPECT_EQ(batch.images.grids[r][1].item<int64_t>(), s.grid.width);
    EXPECT_EQ((batch.x[r] == options.row.image_token_id).sum().item<int64_t>(), tokens);
    // The targets are the line's bytes, then the end token; nothing else takes a loss.
    const at::Tensor y = batch.y[r];
    const at::Tensor taken = y.masked_select(y != -100);
    std::vector<int64_t> want(s.text.begin(), s.text.end());
    want.push_back(options.row.end_token_id);
    EXPECT_EQ(std::vector<int64_t>(taken.data_ptr<int64_t>(), taken.data_ptr<int64_t>() + taken.numel()), want) << s.text;
    EXPECT_TRUE(at::equal(batch.images.patches.narrow(0, patch_rows, s.grid.patches()), data->patches(Split::Train, r)));
    patch_rows += s.grid.patches();
  }
  EXPECT_EQ(batch.images.patches.size(0), patch_rows);
  EXPECT_EQ(batch.images.patches.size(1), 3 * 8 * 8);
}

TEST(OcrSet, LinesTooLongForTheRowAreLeftOutAndCounted) {
  const std::string dir = scratch_dir("vlm_ocr_long");
  write_text(dir + "/lines", "Short line\nThis line is a good deal longer\n");
  FortunesDir fortunes(dir);
  VlmDataOptions options = ocr_options(0);
  options.val_fraction = 0;
  options.image.max_image_tokens = 8;
  options.row.seq_len = 8 + 10;  // image tokens, "Short line" and the end token, less the last target
  const auto data = load_vlm_dataset("ocr", options);
  ASSERT_EQ(data->size(Split::Train), 1);
  EXPECT_EQ(data->sample(Split::Train, 0).text, "Short line");
  EXPECT_NE(data->description().find("1 lines left out"), std::string::npos) << data->description();
  options.row.seq_len = 5;
  try {
    load_vlm_dataset("ocr", options);
    FAIL() << "no line fits, yet the set loaded";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("no line of the OCR set fits"), std::string::npos) << e.what();
  }
}

TEST(OcrSet, WithoutTheFortunesPackageTheSyntheticCorpusIsRenderedWithAWarning) {
  FortunesDir fortunes(scratch_dir("vlm_ocr_no_fortunes"));
  const auto data = load_vlm_dataset("ocr", ocr_options(128));
  EXPECT_NE(data->warning().find("the fortunes package is missing"), std::string::npos) << data->warning();
  EXPECT_NE(data->description().find("built-in synthetic corpus"), std::string::npos) << data->description();
  EXPECT_GE(data->size(Split::Train) + data->size(Split::Validation), 100) << data->description();
}
