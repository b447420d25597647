// Vision-language samples from jsonl files: the row layout (data/vlm_row.h), the batch's images in
// placeholder order (data/vlm_dataset.h) and bad input named by file and line (data/vlm_jsonl.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "data/vlm_dataset.h"
#include "data/vlm_row.h"
#include "support/scratch.h"
#include "vlm_test_files.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

constexpr int64_t kImage = 256, kEnd = 257, kNone = kIgnoredTarget;

std::vector<int64_t> values(const at::Tensor& t) { return {t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel()}; }

// 4-pixel patches, no merging: an image of h x w pixels (multiples of 4, at most 32 a side) keeps
// its size and takes (h/4)·(w/4) tokens.
VlmDataOptions jsonl_options(int seq_len) {
  VlmDataOptions o;
  o.row = {seq_len, kImage, kEnd};
  o.image = {4, 1, 8, 64, 3};
  o.max_image_pixels = 1000;
  o.val_fraction = 0;
  return o;
}

std::string load_error(const std::string& jsonl, const VlmDataOptions& options) {
  try {
    load_vlm_dataset("vlm:" + jsonl, options);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "no error";
}

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

TEST(VlmDataset, RowsAndImagesOfSamplesWithAndWithoutImageAndPrompt) {
  const std::string dir = scratch_dir("vlm_jsonl");
  std::filesystem::create_directories(dir + "/img");
  std::vector<uint8_t> black_over_white(4 * 8, 0);
  std::fill(black_over_white.begin() + 4 * 4, black_over_white.end(), 255);
  write_png(dir + "/img/tall.png", 4, 8, 1, black_over_white);                   // 2 x 1 patches
  write_jpg(dir + "/wide.jpg", 12, 4, 3, solid_pixels(12, 4, {0, 0, 0}));         // 1 x 3 patches
  write_text(dir + "/train.jsonl",
             "{\"image\": \"img/tall.png\", \"prompt\": \"Q\", \"text\": \"ab\"}\n"
             "\n"
             "{\"text\": \"hi\", \"id\": 17}\n"
             "{\"image\": \"" + dir + "/wide.jpg\", \"text\": \"w\"}\n");
  const auto data = load_vlm_dataset("vlm:" + dir + "/train.jsonl", jsonl_options(8));
  ASSERT_EQ(data->size(Split::Train), 3);
  EXPECT_EQ(data->sample(Split::Train, 2).origin, dir + "/train.jsonl line 4");
  const Batch batch = data->batch(Split::Train, {2, 1, 0});
  EXPECT_EQ(values(batch.x[0]), (std::vector<int64_t>{kImage, kImage, kImage, 'w', kEnd, kEnd, kEnd, kEnd}));
  EXPECT_EQ(values(batch.y[0]), (std::vector<int64_t>{kNone, kNone, 'w', kEnd, kNone, kNone, kNone, kNone}));
  EXPECT_EQ(values(batch.x[1]), (std::vector<int64_t>{'h', 'i', kEnd, kEnd, kEnd, kEnd, kEnd, kEnd}));
  EXPECT_EQ(values(batch.y[1]), (std::vector<int64_t>{'i', kEnd, kNone, kNone, kNone, kNone, kNone, kNone}));
  EXPECT_EQ(values(batch.x[2]), (std::vector<int64_t>{kImage, kImage, 'Q', 'a', 'b', kEnd, kEnd, kEnd}));
  EXPECT_EQ(values(batch.y[2]), (std::vector<int64_t>{kNone, kNone, 'a', 'b', kEnd, kNone, kNone, kNone}));
  // Images in placeholder order: the wide black one (row 0), then the tall black-over-white one (row 2);
  // standardized, the flat black one is all 0, the other's top patch -1 and bottom patch 1.
  EXPECT_EQ(values(batch.images.grids.flatten()), (std::vector<int64_t>{1, 3, 2, 1}));
  ASSERT_EQ(batch.images.patches.sizes(), (at::IntArrayRef{5, 3 * 4 * 4}));
  EXPECT_LT(batch.images.patches.narrow(0, 0, 3).abs().max().item<float>(), 1e-5f);
  EXPECT_NEAR(batch.images.patches[3].max().item<float>(), -1.0f, 1e-5f);
  EXPECT_NEAR(batch.images.patches[4].min().item<float>(), 1.0f, 1e-5f);
  // Without an image the batch still carries its (empty) image tensors.
  const Batch text_only = data->batch(Split::Train, {1});
  EXPECT_EQ(text_only.images.count(), 0);
  EXPECT_EQ(text_only.images.patches.sizes(), (at::IntArrayRef{0, 48}));
}

TEST(VlmDataset, TheLastSamplesAreHeldOut) {
  const std::string dir = scratch_dir("vlm_split");
  std::string lines;
  for (int i = 0; i < 10; ++i) lines += "{\"text\": \"t" + std::to_string(i) + "\"}\n";
  write_text(dir + "/d.jsonl", lines);
  VlmDataOptions options = jsonl_options(8);
  options.val_fraction = 0.2;
  const auto data = load_vlm_dataset("vlm:" + dir + "/d.jsonl", options);
  ASSERT_EQ(data->size(Split::Train), 8);
  ASSERT_EQ(data->size(Split::Validation), 2);
  EXPECT_EQ(data->sample(Split::Validation, 0).text, "t8");
  EXPECT_EQ(data->sample(Split::Validation, 1).text, "t9");
  EXPECT_NE(data->description().find("8 training, 2 validation samples"), std::string::npos) << data->description();
}

TEST(VlmDataset, EachBadSampleIsAnErrorNamingTheFileAndLine) {
  const std::string dir = scratch_dir("vlm_bad");
  write_png(dir + "/ok.png", 8, 8, 1, solid_pixels(8, 8, {128}));
  write_png(dir + "/big.png", 40, 30, 1, solid_pixels(40, 30, {128}));
  write_text(dir + "/garbage.png", "these bytes are no image");
  const std::string whole = read_bytes(dir + "/ok.png");
  write_text(dir + "/cut.png", whole.substr(0, whole.size() - 20));
  const std::string good = "{\"image\": \"ok.png\", \"text\": \"fine\"}\n";
  const struct {
    std::string line, problem;
  } cases[] = {
      {"{\"image\": \"absent.png\", \"text\": \"t\"}", "image '" + dir + "/absent.png' does not exist"},
      {"{\"image\": \"garbage.png\", \"text\": \"t\"}", "garbage.png' is not an image"},
      {"{\"image\": \"cut.png\", \"text\": \"t\"}", "cut.png' cannot be decoded"},
      {"{\"image\": \"big.png\", \"text\": \"t\"}", "big.png' is 40x30 = 1200 pixels, above data.max_image_pixels 1000"},
      {"{\"image\": \"ok.png\", \"prompt\": \"p\"}", "has no \"text\""},
      {"{\"text\": 42}", "\"text\" is a number, not a string"},
      {"{\"text\": \"t\", \"image\": [1]}", "\"image\" is an array, not a string"},
      {"{\"text\": \"unclosed}", "is not JSON"},
      {"[\"text\", \"t\"]", "is an array, not an object"},
      {"{\"image\": \"ok.png\", \"text\": \"far too long\"}", "needs 17 positions (4 image tokens, 0 prompt, 12 text, 1 end) but a row of model.seq_len 8 holds 9"},
      {"{\"text\": \"has \\u0100\"}", "its text tokenizes to model.vision.image_token_id 196"},
  };
  for (const auto& c : cases) {
    write_text(dir + "/d.jsonl", good + "\n" + c.line + "\n" + good);
    VlmDataOptions options = jsonl_options(8);
    if (c.problem.find("image_token_id") != std::string::npos) options.row.image_token_id = 196;  // "Ā" is bytes c4 80
    const std::string error = load_error(dir + "/d.jsonl", options);
    EXPECT_NE(error.find("data.source: " + dir + "/d.jsonl line 3: "), std::string::npos) << c.line << "\n -> " << error;
    EXPECT_NE(error.find(c.problem), std::string::npos) << c.line << "\n -> " << error;
  }
  EXPECT_NE(load_error(dir + "/absent.jsonl", jsonl_options(8)).find("vlm file '" + dir + "/absent.jsonl' does not exist"),
            std::string::npos);
}

TEST(VlmDataset, BadSamplesAreSkippedAndCountedWhenAskedTo) {
  const std::string dir = scratch_dir("vlm_skip");
  write_png(dir + "/ok.png", 8, 4, 3, solid_pixels(8, 4, {1, 2, 3}));
  write_text(dir + "/d.jsonl",
             "{\"image\": \"ok.png\", \"text\": \"one\"}\n"
             "{\"image\": \"absent.png\", \"text\": \"t\"}\n"
             "not json\n"
             "{\"text\": \"two\"}\n"
             "{\"prompt\": \"no text\"}\n");
  VlmDataOptions options = jsonl_options(8);
  EXPECT_NE(load_error(dir + "/d.jsonl", options).find("line 2"), std::string::npos);
  options.skip_bad_samples = true;
  const auto data = load_vlm_dataset("vlm:" + dir + "/d.jsonl", options);
  EXPECT_EQ(data->skipped_samples(), 3);
  ASSERT_EQ(data->size(Split::Train), 2);
  EXPECT_EQ(data->sample(Split::Train, 0).text, "one");
  EXPECT_EQ(data->sample(Split::Train, 1).text, "two");
  EXPECT_NE(data->description().find("3 bad samples skipped (data.skip_bad_samples), the first: " + dir + "/d.jsonl line 2: image"),
            std::string::npos)
      << data->description();
  // Nothing usable left is an error that still says what was skipped.
  write_text(dir + "/none.jsonl", "{\"image\": \"absent.png\", \"text\": \"t\"}\n");
  EXPECT_NE(load_error(dir + "/none.jsonl", options).find("1 bad samples skipped"), std::string::npos);
}

TEST(VlmDataset, AnImageThatChangedSinceLoadIsNamedByTheBatch) {
  const std::string dir = scratch_dir("vlm_changed");
  write_png(dir + "/a.png", 8, 4, 1, solid_pixels(8, 4, {9}));
  write_text(dir + "/d.jsonl", "{\"image\": \"a.png\", \"text\": \"x\"}\n");
  const auto data = load_vlm_dataset("vlm:" + dir + "/d.jsonl", jsonl_options(8));
  write_png(dir + "/a.png", 4, 4, 1, solid_pixels(4, 4, {9}));
  try {
    data->batch(Split::Train, {0});
    FAIL() << "a changed image went into a batch";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/d.jsonl line 1: image '" + dir + "/a.png' is 4x4 pixels, 8x4 when the data was loaded"),
              std::string::npos)
        << e.what();
  }
  std::filesystem::remove(dir + "/a.png");
  try {
    data->batch(Split::Train, {0});
    FAIL() << "a removed image went into a batch";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find(dir + "/d.jsonl line 1: image '" + dir + "/a.png' does not exist"), std::string::npos) << e.what();
  }
}

TEST(VlmDataset, OptionsOutOfRangeNameTheirKey) {
  auto error = [](VlmDataOptions o) {
    try {
      load_vlm_dataset("vlm:unused.jsonl", o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    } catch (const std::runtime_error&) {
    }
    return std::string("no error");
  };
  VlmDataOptions o = jsonl_options(8);
  EXPECT_EQ(error(o), "no error");
  o.row.end_token_id = kImage;
  EXPECT_NE(error(o).find("model.vision.image_token_id and model.vision.end_token_id are both 256"), std::string::npos);
  o = jsonl_options(0);
  EXPECT_NE(error(o).find("model.seq_len"), std::string::npos);
  o = jsonl_options(8);
  o.max_image_pixels = 0;
  EXPECT_NE(error(o).find("data.max_image_pixels"), std::string::npos);
  o = jsonl_options(8);
  o.val_fraction = 1;
  EXPECT_NE(error(o).find("data.val_fraction"), std::string::npos);
  o = jsonl_options(8);
  o.image.patch_size = 0;
  EXPECT_NE(error(o).find("model.vision.patch_size"), std::string::npos);
  EXPECT_THROW(load_vlm_dataset("builtin", jsonl_options(8)), std::invalid_argument);
  EXPECT_TRUE(is_vlm_source("ocr"));
  EXPECT_TRUE(is_vlm_source("vlm:x.jsonl"));
  EXPECT_FALSE(is_vlm_source("text:x.txt"));
}
