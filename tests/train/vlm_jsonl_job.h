// A vision-language job through the real trainer and data: the vlm-ocr model made small enough that a
// run takes seconds, and a jsonl dataset (data.source "vlm:FILE.jsonl") written by the test, its
// images PNG files of a fixed pattern written with stb_image_write.
#pragma once
#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "../data/vlm_test_files.h"
#include "training_run.h"

namespace dtrain::test {

// The vlm-ocr preset made small (training_run.h's kBase fixes the rest): an image of up to 8 x 8
// patches of 2 pixels, merged 2 x 2 into at most 16 tokens, fits a row of 32 beside a prompt and text.
inline const Sets kTinyVlm = {"model.preset=vlm-ocr", "model.n_layer=2", "model.d_model=32", "model.n_head=4",
                              "model.n_kv_head=2", "model.seq_len=32", "model.vision.n_layer=2", "model.vision.n_head=2",
                              "model.vision.d_model=32", "model.vision.patch_size=2", "model.vision.max_grid=8",
                              "data.max_image_tokens=16", "data.val_fraction=0"};

// One line of the jsonl: an image of width x height pixels (none when width is 0), or `line` verbatim
// when it is set (a bad sample); the image's file may be written apart (`write_image` false).
struct VlmLine {
  int width = 0, height = 0;
  std::string text;
  std::string line;
  bool write_image = true;
};

// A width x height RGB image whose pixels vary with position and `seed`, so that every patch differs.
inline std::vector<uint8_t> patterned_pixels(int width, int height, int seed) {
  std::vector<uint8_t> pixels;
  for (int y = 0; y < height; ++y)
    for (int x = 0; x < width; ++x)
      for (int c = 0; c < 3; ++c) pixels.push_back(uint8_t((x * 37 + y * 11 + seed * 53 + c * 80) & 255));
  return pixels;
}

// Writes `lines` to dir/data.jsonl (images beside it as imgN.png, prompt "Read:") and returns the
// data.source override that reads it.
inline std::string write_vlm_jsonl(const std::string& dir, const std::vector<VlmLine>& lines) {
  std::ofstream jsonl(dir + "/data.jsonl");
  for (size_t i = 0; i < lines.size(); ++i) {
    const VlmLine& l = lines[i];
    if (!l.line.empty()) {
      jsonl << l.line << "\n";
      continue;
    }
    nlohmann::json sample = {{"prompt", "Read:"}, {"text", l.text}};
    if (l.width > 0) {
      const std::string image = "img" + std::to_string(i) + ".png";
      if (l.write_image) write_png(dir + "/" + image, l.width, l.height, 3, patterned_pixels(l.width, l.height, int(i)));
      sample["image"] = image;
    }
    jsonl << sample.dump() << "\n";
  }
  return "data.source=vlm:" + dir + "/data.jsonl";
}

// `n` samples of images of several sizes and shapes, every fourth without one, and texts of the same
// length: each row carries 7 targets (6 characters and the end), so a micro-batch's mean loss is the
// mean over its targets whichever samples it groups (docs/decisions.md), and layouts that group the
// samples differently train alike.
inline std::vector<VlmLine> equal_target_lines(int n) {
  const int sizes[4][2] = {{16, 16}, {8, 4}, {0, 0}, {12, 16}};
  std::vector<VlmLine> lines;
  for (int i = 0; i < n; ++i) {
    std::string text;
    for (int k = 0; k < 6; ++k) text += char('a' + (i * 5 + k * 3) % 26);
    lines.push_back({sizes[i % 4][0], sizes[i % 4][1], text});
  }
  return lines;
}

}  // namespace dtrain::test
