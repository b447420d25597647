// Vision-language data through `dtrain run`: ranks whose micro-batches hold very different numbers of
// image tokens train to the end, each sample drawn once per epoch, and each step's FLOPs count its
// images; and bad samples (an image missing, undecodable or above data.max_image_pixels, a line
// without "text") stop the run before any rank starts, naming the file and line, unless
// data.skip_bad_samples leaves them out and counts them.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "drawn_samples.h"
#include "support/scratch.h"
#include "train/training_state.h"
#include "vlm_jsonl_job.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// A collective that one rank never joins fails after this long instead of hanging the test.
const Sets kVlmShortTimeout = {"dist.timeout_s=60"};

// Texts of 1 to 5 characters, a sample `line` of the jsonl.
std::string vlm_text_of(int i) { return std::string(size_t(1 + i % 5), char('a' + i % 26)); }

// The good samples lines_around_bad a bad one, line 4 of the file.
std::vector<VlmLine> lines_around_bad(const VlmLine& bad) {
  std::vector<VlmLine> lines;
  for (int i = 0; i < 8; ++i) lines.push_back({16, 16, vlm_text_of(i)});
  lines.insert(lines.begin() + 3, bad);
  return lines;
}

// A 40 x 40 image, above data.max_image_pixels 1000 (the small model's images are 16 x 16 at most).
const Sets kVlmPixelLimit = {"data.max_image_pixels=1000"};

}  // namespace

// 24 samples dealt round-robin to 2 ranks, unshuffled: rank 0 draws the even ones, each a 16 x 16
// image of 16 tokens; rank 1 the odd ones, a 4 x 4 image of 1 token or no image. 6 steps of 8 are two
// epochs: every sample once in each (a micro-batch on each rank that repeats one sample in place of
// another fails it). A run that hangs fails after dist.timeout_s.
TEST(VisionLanguageDataRuns, RanksWithVeryDifferentImageTokenCountsTrainEverySampleOncePerEpoch) {
  const std::string dir = scratch_dir("vlm_uneven");
  std::vector<VlmLine> lines;
  for (int i = 0; i < 24; ++i) {
    const int side = i % 2 == 0 ? 16 : i % 4 == 1 ? 4 : 0;
    lines.push_back({side, side, vlm_text_of(i)});
  }
  const Sets job = kTinyVlm + kVlmShortTimeout +
                   Sets{write_vlm_jsonl(dir, lines), "data.shuffle=false", "train.steps=6", "train_batch_size=8", "train_micro_batch_size_per_gpu=2"};
  const TrainingRun run = train(dir + "/run", 2, job, {}, {"DTRAIN_LOG_SAMPLES=" + dir + "/samples"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  ASSERT_EQ(run.steps.size(), 6u) << run.result.output;
  EXPECT_TRUE(contains(run.result.output, "batch: 8 = micro 2 x accumulation 2 x dp 2")) << run.result.output;

  // Each step's FLOPs: the LLM's per token over its 8 rows of 32, and its images' (4 of 8 x 8
  // patches on rank 0, 2 of 2 x 2 on rank 1) through the encoder and connector.
  const TransformerConfig m = load_model(ckpt(run.dir, 6))->config();
  const double step_flops = m.train_flops_per_token() * 8 * 32 + 4 * m.vision.train_flops_per_image(8, 8, m.d_model) +
                            2 * m.vision.train_flops_per_image(2, 2, m.d_model);
  for (const nlohmann::json& step : run.steps) {
    const double counted = step["flops"].get<double>() * step["step_s"].get<double>();
    EXPECT_NEAR(counted, step_flops, 1e-9 * step_flops) << "step " << step["step"];
  }

  std::ifstream rank0(dir + "/samples.rank0");
  int micro_batches = 0;
  for (std::string line; std::getline(rank0, line); ++micro_batches) {
    std::istringstream fields(line);
    int64_t epoch = 0, sample = 0;
    fields >> epoch;
    while (fields >> sample) EXPECT_EQ(sample % 2, 0) << "rank 0 drew sample " << sample << ", not one of the large images";
  }
  EXPECT_EQ(micro_batches, 12);
  const auto got = drawn(dir + "/samples");
  EXPECT_EQ(total(got), 48);
  for (int64_t epoch : {0, 1})
    for (int64_t sample = 0; sample < 24; ++sample) EXPECT_EQ(got.count({epoch, sample}) ? got.at({epoch, sample}) : 0, 1)
        << "epoch " << epoch << " sample " << sample;
}

// Each bad sample on line 4 of its file: `dtrain run` exits non-zero before any rank starts, naming
// the file, the line and the problem, and leaves no checkpoint or metrics behind.
TEST(VisionLanguageDataRuns, ABadSampleStopsTheRunNamingItsFileAndLine) {
  struct Case {
    std::string name;
    VlmLine bad;
    std::string says;  // after "image 'DIR/img3.png' " when the bad sample has an image
  };
  const std::vector<Case> cases = {
      {"missing", {16, 16, "abc", "", false}, "does not exist"},
      {"undecodable", {16, 16, "abc", "", false}, "is not an image stb_image reads"},
      {"too_large", {40, 40, "abc"}, "is 40x40 = 1600 pixels, above data.max_image_pixels 1000"},
      {"no_text", {0, 0, "", "{\"image\": \"img0.png\", \"prompt\": \"Read:\"}"}, "has no \"text\""}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const std::string dir = scratch_dir("vlm_bad_" + c.name);
    const std::string source = write_vlm_jsonl(dir, lines_around_bad(c.bad));
    if (c.name == "undecodable") write_text(dir + "/img3.png", "not an image at all");
    const TrainingRun run = train(dir + "/run", 2, kTinyVlm + kVlmPixelLimit + Sets{source});
    EXPECT_NE(run.result.exit_code, 0);
    const std::string says = c.bad.width > 0 ? "image '" + dir + "/img3.png' " + c.says : c.says;
    EXPECT_TRUE(contains(run.result.output, "data.source: " + dir + "/data.jsonl line 4: " + says)) << run.result.output;
    EXPECT_TRUE(contains(run.result.output, "(data.skip_bad_samples: true skips such samples)")) << run.result.output;
    EXPECT_FALSE(fs::exists(dir + "/run/ckpt")) << "a checkpoint of a run that never started";
    EXPECT_FALSE(fs::exists(dir + "/run/metrics.jsonl")) << "metrics of a run that never started";
  }
}

// All four bad samples in one file under data.skip_bad_samples: the run trains on the 8 good ones
// only (the sample log holds no other index) and its log counts the 4 it left out.
TEST(VisionLanguageDataRuns, SkipBadSamplesTrainsOnTheGoodOnesAndCountsTheOthers) {
  const std::string dir = scratch_dir("vlm_skip_bad");
  std::vector<VlmLine> lines;
  for (int i = 0; i < 8; ++i) lines.push_back({16, 16, vlm_text_of(i)});
  lines.push_back({16, 16, "gone", "", false});
  lines.push_back({16, 16, "junk", "", false});
  lines.push_back({40, 40, "big"});
  lines.push_back({0, 0, "", "{\"image\": \"img0.png\"}"});
  const std::string source = write_vlm_jsonl(dir, lines);
  write_text(dir + "/img9.png", "not an image at all");
  const TrainingRun run = train(dir + "/run", 2, kTinyVlm + kVlmPixelLimit +
                                                     Sets{source, "data.skip_bad_samples=true", "train_batch_size=4", "train_micro_batch_size_per_gpu=2"},
                                {}, {"DTRAIN_LOG_SAMPLES=" + dir + "/samples"});
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  EXPECT_EQ(run.steps.size(), 4u);
  const std::string skipped = "(8 samples, 8 with an image); 8 training, 0 validation samples; 4 bad samples skipped "
                              "(data.skip_bad_samples), the first: " + dir + "/data.jsonl line 9: image '" + dir + "/img8.png' does not exist";
  EXPECT_TRUE(contains(run.result.output, skipped)) << run.result.output;
  EXPECT_TRUE(contains(read_bytes(dir + "/run/rank-0.log"), "4 bad samples skipped")) << "the rank's log does not count them";
  for (const auto& [key, count] : drawn(dir + "/samples")) EXPECT_LT(key.second, 8) << "trained on sample " << key.second;
}

}  // namespace dtrain::test
