// Images for the vision encoder: decoding (data/image_decode.h), the patch grid (data/patch_grid.h)
// and the patch layout (data/image_patches.h).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "data/image_decode.h"
#include "data/image_patches.h"
#include "data/patch_grid.h"
#include "support/scratch.h"
#include "vlm_test_files.h"

using namespace dtrain;
using namespace dtrain::test;

TEST(ImageDecode, PngPixelsComeBackExactly) {
  const std::string dir = scratch_dir("vlm_png");
  std::vector<uint8_t> rgb;
  for (int i = 0; i < 5 * 3; ++i) rgb.insert(rgb.end(), {uint8_t(i * 17), uint8_t(255 - i), uint8_t(i % 2 ? 200 : 10)});
  write_png(dir + "/rgb.png", 5, 3, 3, rgb);
  const Image image = load_image_file(dir + "/rgb.png", 1000);
  EXPECT_EQ(image.width, 5);
  EXPECT_EQ(image.height, 3);
  EXPECT_EQ(image.channels, 3);
  EXPECT_EQ(image.pixels, rgb);
}

TEST(ImageDecode, GreyStaysGreyAndTransparencyLiesOverWhite) {
  const std::string dir = scratch_dir("vlm_alpha");
  write_png(dir + "/grey.png", 2, 1, 1, {0, 90});
  const Image grey = load_image_file(dir + "/grey.png", 1000);
  EXPECT_EQ(grey.channels, 1);
  EXPECT_EQ(grey.pixels, (std::vector<uint8_t>{0, 90}));
  // Black fully transparent, black half transparent, red opaque.
  write_png(dir + "/rgba.png", 3, 1, 4, {0, 0, 0, 0, 0, 0, 0, 128, 255, 0, 0, 255});
  const Image rgba = load_image_file(dir + "/rgba.png", 1000);
  EXPECT_EQ(rgba.channels, 3);
  EXPECT_EQ(rgba.pixels, (std::vector<uint8_t>{255, 255, 255, 127, 127, 127, 255, 0, 0}));
}

TEST(ImageDecode, JpegDecodesToItsColours) {
  const std::string dir = scratch_dir("vlm_jpg");
  write_jpg(dir + "/solid.jpg", 16, 8, 3, solid_pixels(16, 8, {200, 40, 90}));
  const Image image = load_image_file(dir + "/solid.jpg", 1000);
  ASSERT_EQ(image.width, 16);
  ASSERT_EQ(image.height, 8);
  ASSERT_EQ(image.channels, 3);
  const std::vector<int> want{200, 40, 90};
  for (size_t i = 0; i < image.pixels.size(); ++i)
    EXPECT_NEAR(int(image.pixels[i]), want[i % 3], 4) << "byte " << i;  // JPEG at quality 95 is lossy by a few levels
}

TEST(ImageDecode, ErrorsNameTheFileAndWhatIsWrong) {
  const std::string dir = scratch_dir("vlm_bad_images");
  auto error = [](const std::string& path, int64_t max_pixels) {
    try {
      load_image_file(path, max_pixels);
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(error(dir + "/absent.png", 100).find("absent.png' does not exist"), std::string::npos);
  write_text(dir + "/text.png", "not an image at all");
  EXPECT_NE(error(dir + "/text.png", 100).find("text.png' is not an image"), std::string::npos);
  write_png(dir + "/big.png", 20, 10, 1, solid_pixels(20, 10, {7}));
  EXPECT_NE(error(dir + "/big.png", 199).find("big.png' is 20x10 = 200 pixels, above data.max_image_pixels 199"), std::string::npos);
  EXPECT_EQ(error(dir + "/big.png", 200), "no error");
  // A header that promises more than the file holds passes a header check and fails to decode.
  const std::string whole = read_bytes(dir + "/big.png");
  write_text(dir + "/cut.png", whole.substr(0, whole.size() / 2));
  EXPECT_NO_THROW(read_image_size(read_bytes(dir + "/cut.png")));
  EXPECT_NE(error(dir + "/cut.png", 1000).find("cut.png' cannot be decoded"), std::string::npos);
}

TEST(PatchGrid, AnImageThatFitsKeepsItsSizeRoundedToTheMerge) {
  EXPECT_EQ(fit_patch_grid(64, 128, {16, 1, 32, 256, 3}).height, 4);
  EXPECT_EQ(fit_patch_grid(64, 128, {16, 1, 32, 256, 3}).width, 8);
  // 30 x 100 pixels of 8-pixel patches: 3.75 x 12.5 patches, to multiples of 2: 4 x 12.
  const PatchGrid merged = fit_patch_grid(30, 100, {8, 2, 64, 256, 3});
  EXPECT_EQ(merged.height, 4);
  EXPECT_EQ(merged.width, 12);
  EXPECT_EQ(image_tokens(merged, 2), 12);
}

TEST(PatchGrid, LargeImagesShrinkToTheTokenBudgetKeepingTheirAspect) {
  // 1000 x 2000 pixels, 10-pixel patches merged 2x2, 50 tokens: 10 x 20 patches, 5 x 10 tokens.
  const PatchGrid grid = fit_patch_grid(1000, 2000, {10, 2, 64, 50, 3});
  EXPECT_EQ(grid.height, 10);
  EXPECT_EQ(grid.width, 20);
  // One side past max_grid: 100 x 1000 pixels in a 20-patch side.
  const PatchGrid wide = fit_patch_grid(100, 1000, {10, 1, 20, 1000, 3});
  EXPECT_EQ(wide.height, 2);
  EXPECT_EQ(wide.width, 20);
}

TEST(PatchGrid, ALineAFewPixelsHighStillHasARow) {
  const PatchGrid grid = fit_patch_grid(3, 5000, {16, 2, 64, 32, 3});
  EXPECT_EQ(grid.height, 2);
  EXPECT_EQ(grid.width, 64);
  EXPECT_EQ(image_tokens(grid, 2), 32);
}

TEST(PatchGrid, EveryGridMeetsItsLimitsAndKeepsTheAspectWhereItCan) {
  std::mt19937 rng(5);
  for (int trial = 0; trial < 3000; ++trial) {
    const PatchOptions o{int(rng() % 20 + 1), int(rng() % 2 + 1), int(rng() % 60 + 2), int64_t(rng() % 400 + 1), 3};
    const int64_t h = rng() % 3000 + 1, w = rng() % 3000 + 1;
    const PatchGrid g = fit_patch_grid(h, w, o);
    const std::string at = std::to_string(h) + "x" + std::to_string(w) + " patch " + std::to_string(o.patch_size) + " merge " +
                           std::to_string(o.merge) + " max_grid " + std::to_string(o.max_grid) + " tokens " +
                           std::to_string(o.max_image_tokens);
    ASSERT_EQ(g.height % o.merge, 0) << at;
    ASSERT_EQ(g.width % o.merge, 0) << at;
    ASSERT_GE(g.height, o.merge) << at;
    ASSERT_GE(g.width, o.merge) << at;
    ASSERT_LE(g.height, o.max_grid) << at;
    ASSERT_LE(g.width, o.max_grid) << at;
    ASSERT_LE(image_tokens(g, o.merge), o.max_image_tokens) << at;
    ASSERT_LE(g.height * o.patch_size, std::max<int64_t>(h + o.patch_size * o.merge, o.patch_size * o.merge)) << at << ": enlarged";
    // Where neither side sits at a bound, each is within one merge step of the other's aspect. A
    // grid of at least 4 steps a side rounds by at most a quarter.
    const int64_t side_limit = o.max_grid / o.merge * o.merge;
    const bool bounded = g.height == o.merge || g.width == o.merge || g.height == side_limit || g.width == side_limit;
    if (!bounded && g.height >= 4 * o.merge && g.width >= 4 * o.merge) {
      const double aspect = double(g.width) / double(g.height), want = double(w) / double(h);
      ASSERT_NEAR(std::log(aspect / want), 0.0, std::log(1.0 + 2.0 / 3.0)) << at;
    }
  }
}

TEST(PatchGrid, OptionsOutOfRangeNameTheirKey) {
  auto error = [](PatchOptions o) {
    try {
      validate(o);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error({14, 1, 32, 256, 3}), "no error");
  EXPECT_NE(error({0, 1, 32, 256, 3}).find("model.vision.patch_size"), std::string::npos);
  EXPECT_NE(error({14, 3, 32, 256, 3}).find("model.vision.merge"), std::string::npos);
  EXPECT_NE(error({14, 2, 1, 256, 3}).find("model.vision.max_grid"), std::string::npos);
  EXPECT_NE(error({14, 1, 32, 0, 3}).find("data.max_image_tokens"), std::string::npos);
  EXPECT_NE(error({14, 1, 32, 256, 4}).find("model.vision.channels"), std::string::npos);
}

TEST(ImagePatches, AKnownPixelLandsAtItsPatchRowColumnAndChannel) {
  // 4 x 6 pixels in 2-pixel patches: a 2 x 3 grid. All black but the pixel at row 3, column 5,
  // which is magenta: patch (1, 2), row-major index 5; inside it (y 1, x 1).
  Image image{6, 4, 3, solid_pixels(6, 4, {0, 0, 0})};
  const size_t at = (3 * 6 + 5) * 3;
  image.pixels[at] = 255;
  image.pixels[at + 2] = 255;
  const at::Tensor patches = image_to_patches(image, {2, 3}, 2, 3);
  ASSERT_EQ(patches.sizes(), (at::IntArrayRef{6, 12}));
  // Channel-major inside a patch: (ch, y, x) at ch·4 + y·2 + x.
  at::Tensor want = at::full({6, 12}, -1.0f);
  want[5][0 * 4 + 1 * 2 + 1] = 1.0f;
  want[5][2 * 4 + 1 * 2 + 1] = 1.0f;
  want = (want - want.mean()) / (want - want.mean()).square().mean().sqrt();
  EXPECT_TRUE(at::allclose(patches, want, 0, 1e-6)) << patches;
}

TEST(ImagePatches, GreyIsRepeatedForRgbAndResizingKeepsAFlatImageFlat) {
  const Image grey{4, 2, 1, {0, 255, 0, 255, 0, 255, 0, 255}};
  const at::Tensor rgb = image_to_patches(grey, {1, 2}, 2, 3);
  ASSERT_EQ(rgb.sizes(), (at::IntArrayRef{2, 12}));
  EXPECT_TRUE(at::equal(rgb.narrow(1, 0, 4), rgb.narrow(1, 4, 4)));
  EXPECT_TRUE(at::equal(rgb.narrow(1, 0, 4), rgb.narrow(1, 8, 4)));
  // Half black, half white: standardized to -1 and 1.
  EXPECT_NEAR(rgb[0][0].item<float>(), -1.0f, 1e-6);
  EXPECT_NEAR(rgb[0][1].item<float>(), 1.0f, 1e-6);
  // 50 x 30 pixels of grey 100, cut into a 3 x 5 grid of 4-pixel patches (12 x 20 pixels).
  const at::Tensor flat = image_to_patches({50, 30, 1, std::vector<uint8_t>(1500, 100)}, {3, 5}, 4, 1);
  ASSERT_EQ(flat.sizes(), (at::IntArrayRef{15, 16}));
  EXPECT_LT(flat.abs().max().item<float>(), 1e-6f);  // flat: nothing to read, all zeros
}

TEST(ImagePatches, ThePaperBrightnessAndInkContrastDoNotChangeThePatches) {
  // One pattern of ink on paper twice: black on white, and grey 60 on grey 180. The patches must not
  // tell them apart, or the encoder learns paper levels before glyphs.
  std::vector<uint8_t> ink(8 * 4);
  for (size_t i = 0; i < ink.size(); ++i) ink[i] = (i * 7 + i / 3) % 5 == 0;
  Image sharp{8, 4, 1, {}}, dull{8, 4, 1, {}};
  for (const uint8_t v : ink) {
    sharp.pixels.push_back(v ? 0 : 255);
    dull.pixels.push_back(v ? 60 : 180);
  }
  const at::Tensor a = image_to_patches(sharp, {2, 4}, 2, 1), b = image_to_patches(dull, {2, 4}, 2, 1);
  EXPECT_TRUE(at::allclose(a, b, 0, 1e-5)) << a - b;
  EXPECT_NEAR(a.mean().item<double>(), 0.0, 1e-6);
  EXPECT_NEAR(a.square().mean().item<double>(), 1.0, 1e-5);
}
