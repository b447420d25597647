// A vision-language model through the trainer (`dtrain run`) on the built-in text, whose rows hold
// no image: every step runs its vision encoder and connector on no patches. Its parameters are
// named vision.*, connector.* and llm.*, so a freeze glob, ZeRO-3's units, tensor parallelism and
// the layout-free checkpoints address them; the job trained in legs under ZeRO-3, tp 2 and one rank
// trains like one rank uninterrupted. (Images through the same executor: test_vision_language_ranks.)
#include <gtest/gtest.h>

#include "layout_legs.h"
#include "model/transformer.h"

namespace dtrain::test {
namespace {

// The vlm-ocr preset made small (training_run.h's kBase fixes the rest), its encoder frozen.
const Sets kSmallVlm = {"model.preset=vlm-ocr", "model.n_layer=2", "model.d_model=32", "model.n_head=4", "model.n_kv_head=2",
                        "model.seq_len=16", "model.vision.n_layer=2", "model.vision.n_head=2", "model.vision.d_model=32",
                        "model.vision.patch_size=2", "model.vision.max_grid=8", "train.freeze=[\"vision.*\"]"};

}  // namespace

TEST(VisionLanguageTraining, LegsUnderZeroThreeAndTpResumeLikeOneRankWithTheEncoderFrozen) {
  const std::string dir = expect_legs_train_like_one_rank(
      "vlm_training", kLayoutJob + kSmallVlm,
      {{2, {"zero_optimization.stage=3"}, 2, "ZeRO stage 3: parameters, gradients and optimizer state sharded over 2"},
       {2, {"parallel.tp=2"}, 4, "tensor parallel: tp 2"},
       {1, {}, 6, kSaysOneRank}});
  // The frozen encoder is its initial weights, bit for bit.
  const std::map<std::string, at::Tensor> saved = read_parameters(ckpt(dir, 6));
  Transformer initial(load_model(ckpt(dir, 6))->config(), 7);  // train.seed
  int frozen = 0;
  for (const auto& item : initial->named_parameters()) {
    const std::string& name = item.key();
    ASSERT_TRUE(saved.count(name)) << name;
    if (name.rfind("vision.", 0) == 0) {
      EXPECT_TRUE(at::equal(saved.at(name), item.value())) << name << " changed while frozen";
      ++frozen;
    }
  }
  EXPECT_EQ(frozen, 4 + 2 * 16 + 2);  // patch_embed (2), row and column tables, 2 blocks of 16, ln_post (2)
}

}  // namespace dtrain::test
