// What model.arch "vlm" and model.vision.* ask of a config, checked before any work starts: each
// refusal names its key and value; the preset resolves, and a checkpoint's config reads back.
#include <gtest/gtest.h>

#include "config_refusal.h"
#include "train/train_config.h"

using namespace dtrain;
using dtrain::test::BadInput;
using dtrain::test::refusal_of;
using dtrain::test::resolved;

namespace {

const std::string kVlm = "model.preset=vlm-ocr";

}  // namespace

TEST(VisionLanguageConfig, WhatAVisionLanguageModelDoesNotRunUnderIsRefusedNamingTheKey) {
  const std::vector<BadInput> cases = {
      {{kVlm, "parallel.pp=2"}, 2,
       "'parallel.pp' (2) must be 1 for model.arch \"vlm\": pipeline stages hand on hidden states, not the images a vision-language "
       "model's first stage would need; shard it with parallel.tp or zero_optimization.stage instead"},
      {{kVlm, "parallel.cp=2"}, 2,
       "'parallel.cp' (2) must be 1 for model.arch \"vlm\": context parallelism would split each sequence, and the places its image "
       "tokens take, over the cp ranks"},
      {{kVlm, "zero_optimization.stage=3", "zero_optimization.stage3_gather_16bit_weights_on_model_save=true"}, 1,
       "'zero_optimization.stage3_gather_16bit_weights_on_model_save' exports each save as a Hugging Face GPT-2 or Llama model, which "
       "a model.arch \"vlm\" is not; set it false"},
      {{"model.preset=tiny", "model.vision.merge=1"}, 1, "'model.vision.merge' applies to model.arch \"vlm\" only, and the model is \"gpt2\""},
      {{kVlm, "model.vision.merge=3"}, 1, "model.vision.merge must be 1 or 2, got 3"},
      {{kVlm, "model.vocab_size=256"}, 1,
       "model.vision.image_token_id (256) must be a token of the vocabulary, below model.vocab_size (256)"},
      {{kVlm, "model.vision.d_model=130"}, 1, "model.vision.d_model (130) must be a positive multiple of model.vision.n_head (4)"},
      {{kVlm, "model.vision.max_grid=-1"}, 1, "'model.vision.max_grid' must be between 0 and 2147483647, got -1"},
      {{kVlm, "data.ocr_random_lines=100"}, 1,
       "'data.ocr_random_lines' (100) adds lines to the built-in OCR set, and 'data.source' is \"builtin\", not \"ocr\"; set it 0 or "
       "leave it out"},
      {{kVlm, "data.source=ocr", "data.ocr_random_lines=-1"}, 1, "'data.ocr_random_lines' must be between 0 and 10000000, got -1"},
  };
  for (const auto& bad : cases) EXPECT_EQ(refusal_of(bad.sets, bad.world), "cfg.json: " + bad.error);
}

TEST(VisionLanguageConfig, ThePresetAndItsVisionKeysResolveIntoTheRunsConfig) {
  const TrainConfig c = resolved({kVlm, "model.vision.merge=1", "parallel.tp=2", "zero_optimization.stage=3"}, 4);
  EXPECT_TRUE(c.model.is_vlm());
  EXPECT_EQ(c.model.vision.merge, 1);
  EXPECT_EQ(c.model.vision.d_model, 128);
  EXPECT_EQ(c.json["model"]["vision"]["merge"], 1);
  EXPECT_EQ(c.json["model"]["vision"]["d_ff"], 512);
  // The run's config.json is a config of its own: read back, it gives the same model.
  const TrainConfig again = resolve_config(c.json, 4, "config.json");
  EXPECT_EQ(to_json(again.model), to_json(c.model));
  // A text model's resolved config keeps model.vision's keys null.
  EXPECT_TRUE(resolved({"model.preset=tiny"}, 1).json["model"]["vision"]["merge"].is_null());
}
