// `dtrain generate --image` and `--held-out` on a vision-language checkpoint: a tiny model trained
// until it has learned two images' texts reads each back, the same way every time; the bad inputs
// are refused naming the file or the flag at fault.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "support/scratch.h"
#include "tools/held_out_transcription.h"
#include "train/training_run.h"

namespace dtrain::test {
namespace {

namespace fs = std::filesystem;

// A grey PNM (which the image decoder reads as it reads PNG) of `width` x `height` pixels, `pixel(x, y)` each.
template <class Pixel>
void write_pgm(const std::string& path, int width, int height, Pixel pixel) {
  std::ofstream out(path, std::ios::binary);
  out << "P5\n" << width << " " << height << "\n255\n";
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x) out.put(char(pixel(x, y)));
}

// Two images that differ in size and content, each with its text, in a jsonl a run trains on.
std::string write_two_image_set(const std::string& dir) {
  write_pgm(dir + "/dark.pgm", 16, 16, [](int, int) { return 20; });
  write_pgm(dir + "/stripes.pgm", 32, 16, [](int x, int) { return (x / 4) % 2 ? 255 : 0; });
  std::ofstream(dir + "/set.jsonl") << R"({"image": "dark.pgm", "text": "night"})" "\n"
                                    << R"({"image": "stripes.pgm", "text": "zebra crossing"})" "\n";
  return dir + "/set.jsonl";
}

// A vision-language model small enough to learn two samples in a few seconds.
Sets tiny_vlm(const std::string& source) {
  return {"model.preset=vlm-ocr", "model.n_layer=1", "model.n_head=2", "model.n_kv_head=1", "model.d_model=32",
          "model.seq_len=24", "model.vision.n_layer=1", "model.vision.n_head=2", "model.vision.d_model=16",
          "data.source=" + source, "data.val_fraction=0", "train_micro_batch_size_per_gpu=2", "train.steps=80",
          "optimizer.params={\"lr\":0.01,\"weight_decay\":0.0}", "steps_per_print=20"};
}

// What generate printed last: the transcription, after the log lines naming the checkpoint and tokenizer.
std::string last_line(const std::string& output) {
  std::string text = output;
  while (!text.empty() && text.back() == '\n') text.pop_back();
  return text.substr(text.rfind('\n') + 1);
}

ProcessResult generate(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {DTRAIN_BIN, "generate"};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, 120);
}

TEST(GenerateImage, ATrainedCheckpointTranscribesEachImageTheSameWayEveryTime) {
  const std::string dir = scratch_dir("generate_image");
  const std::string jsonl = write_two_image_set(dir);
  const TrainingRun run = train(dir + "/run", 1, tiny_vlm("vlm:" + jsonl));
  ASSERT_EQ(run.result.exit_code, 0) << run.result.output;
  const std::string ckpt = dir + "/run/ckpt";
  for (const auto& [image, text] : {std::pair{"dark.pgm", "night"}, std::pair{"stripes.pgm", "zebra crossing"}}) {
    const ProcessResult first = generate({"--checkpoint", ckpt, "--image", dir + "/" + image});
    ASSERT_EQ(first.exit_code, 0) << first.output;
    EXPECT_EQ(last_line(first.output), text) << image << ": " << first.output;
    const ProcessResult again = generate({"--checkpoint", ckpt, "--image", dir + "/" + image});
    EXPECT_EQ(last_line(again.output), last_line(first.output)) << "greedy transcription is deterministic";
  }
  // Without an image the model continues text alone, as any language model does.
  const ProcessResult text_only = generate({"--checkpoint", ckpt, "--prompt", "ze", "--tokens", "4"});
  EXPECT_EQ(text_only.exit_code, 0) << text_only.output;
  EXPECT_EQ(last_line(text_only.output).rfind("ze", 0), 0u) << text_only.output;
  // The run held nothing out: --held-out says so rather than report on nothing.
  const ProcessResult held_out = generate({"--checkpoint", ckpt, "--held-out", "2"});
  EXPECT_NE(held_out.exit_code, 0);
  EXPECT_TRUE(contains(held_out.output, "no held-out sample")) << held_out.output;
}

TEST(GenerateImage, BadImagesAndTextCheckpointsAreRefusedByName) {
  const std::string dir = scratch_dir("generate_image_bad");
  const std::string jsonl = write_two_image_set(dir);
  Sets short_run = tiny_vlm("vlm:" + jsonl);
  short_run.push_back("train.steps=1");
  ASSERT_EQ(train(dir + "/vlm", 1, short_run).result.exit_code, 0);
  ASSERT_EQ(train(dir + "/text", 1, {}).result.exit_code, 0);
  std::ofstream(dir + "/broken.png") << "\x89PNG\r\n\x1a\n not really";
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  };
  const std::vector<Case> cases = {
      {{"--checkpoint", dir + "/vlm/ckpt", "--image", dir + "/missing.png"}, dir + "/missing.png"},
      {{"--checkpoint", dir + "/vlm/ckpt", "--image", dir + "/broken.png"}, dir + "/broken.png"},
      {{"--checkpoint", dir + "/text/ckpt", "--image", dir + "/dark.pgm"}, "holds a text model"},
      {{"--checkpoint", dir + "/vlm/ckpt", "--image", dir + "/dark.pgm", "--held-out", "1"}, "excludes"},
  };
  for (const auto& c : cases) {
    const ProcessResult r = generate(c.args);
    EXPECT_NE(r.exit_code, 0) << r.output;
    EXPECT_TRUE(contains(r.output, c.needle)) << r.output;
  }
}

TEST(GenerateImage, CharacterAccuracyCountsEditsInCodePoints) {
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3);
  EXPECT_EQ(edit_distance("", "abc"), 3);
  EXPECT_EQ(edit_distance("same", "same"), 0);
  EXPECT_EQ(edit_distance("café", "cafe"), 1);  // é is one character, two bytes
  EXPECT_EQ(code_points("café"), 4);
}

}  // namespace
}  // namespace dtrain::test
