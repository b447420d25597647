// The vision-language model (model.arch "vlm"): its vision encoder over images of any grid up to
// model.vision.max_grid in one batch, the 2×2 merge and the tokens' order (rows or columns), the
// placeholders taking the image tokens in order, gradients to all three parts with images and
// without, and text models left as they were.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/types.h>

#include <string>
#include <vector>

#include "model/image_tokens.h"
#include "model/loss.h"
#include "model/parameter_shapes.h"
#include "model/transformer.h"
#include "support/error_of.h"
#include "support/process.h"

using namespace dtrain;
using namespace dtrain::test;

namespace {

// A small VLM: vision 2 blocks d 16 over 2×2 patches of 3 channels (12 values), up to 8 a side;
// LLM llama 2 blocks d 32, 4 query heads over 2 key/value heads, 24 tokens, bytes + 8.
TransformerConfig small_vlm(int merge = 2) {
  TransformerConfig c;
  c.arch = "vlm";
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.d_model = 32;
  c.seq_len = 24;
  c.vocab_size = 264;
  c.vision.n_layer = 2;
  c.vision.n_head = 2;
  c.vision.d_model = 16;
  c.vision.patch_size = 2;
  c.vision.max_grid = 8;
  c.vision.merge = merge;
  return c;
}

// Images of these grids, with random pixels in [-1, 1], in order.
ImageBatch images_of(const std::vector<std::pair<int64_t, int64_t>>& grids, int64_t patch_values, uint64_t seed = 5) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  ImageBatch b;
  int64_t patches = 0;
  std::vector<int64_t> flat;
  for (const auto& [h, w] : grids) {
    flat.push_back(h);
    flat.push_back(w);
    patches += h * w;
  }
  b.grids = at::tensor(flat, at::kLong).view({int64_t(grids.size()), 2});
  b.patches = at::empty({patches, patch_values}).uniform_(-1, 1, gen);
  return b;
}

// Rows of `T` byte tokens with `placeholders[r]` image placeholders at the start of row r.
at::Tensor rows_with(const std::vector<int64_t>& placeholders, int64_t T, int64_t placeholder = 256) {
  at::Tensor x = at::arange(int64_t(placeholders.size()) * T, at::kLong).remainder(200).view({int64_t(placeholders.size()), T}) + 32;
  for (size_t r = 0; r < placeholders.size(); ++r) x[int64_t(r)].narrow(0, 0, placeholders[r]).fill_(placeholder);
  return x;
}

VisionEncoderImpl& encoder_of(Transformer& m) { return *m->named_children()["vision"]->as<VisionEncoderImpl>(); }

// The encoder's parts run as they are, without hooks.
at::Tensor encode(VisionEncoderImpl& encoder, const ImageBatch& images) {
  return encoder.forward(images, 0, [](int, const std::function<at::Tensor()>& run) { return run(); });
}

}  // namespace

TEST(VisionLanguageModel, ImagesOfDifferentGridsRunInOneBatch) {
  const TransformerConfig c = small_vlm();
  Transformer m(c, 1);
  // Merged tokens: 2x4 → 1·2, 4x2 → 2·1, 2x2 → 1, 8x8 (max_grid) → 16.
  const ImageBatch images = images_of({{2, 4}, {4, 2}, {2, 2}, {8, 8}}, c.vision.patch_values());
  const at::Tensor tokens = encode(encoder_of(m), images);
  EXPECT_EQ(tokens.sizes(), (at::IntArrayRef{21, 16 * 4}));
  const at::Tensor logits = m->forward(rows_with({2, 19}, c.seq_len), images);
  EXPECT_EQ(logits.sizes(), (at::IntArrayRef{2, c.seq_len, c.vocab_size}));
  EXPECT_TRUE(logits.isfinite().all().item<bool>());
}

TEST(VisionLanguageModel, GridsBeyondMaxGridOrNotDividedByTheMergeAreRefusedNamingTheKeys) {
  const TransformerConfig c = small_vlm();
  Transformer m(c, 1);
  const std::string too_large = error_of([&] { encode(encoder_of(m), images_of({{2, 10}}, c.vision.patch_values())); });
  EXPECT_TRUE(contains(too_large, "2 x 10 patches") && contains(too_large, "model.vision.max_grid (8)")) << too_large;
  const std::string odd = error_of([&] { encode(encoder_of(m), images_of({{2, 2}, {3, 2}}, c.vision.patch_values())); });
  EXPECT_TRUE(contains(odd, "image 1 of the batch") && contains(odd, "model.vision.merge (2)")) << odd;
  ImageBatch wrong_width = images_of({{2, 2}}, c.vision.patch_values());
  wrong_width.patches = wrong_width.patches.narrow(1, 0, 8);
  const std::string width = error_of([&] { encode(encoder_of(m), wrong_width); });
  EXPECT_TRUE(contains(width, "12 (model.vision.channels x patch_size^2)")) << width;
}

// Token k of an image is the features of its k-th group of merge × merge patches (groups row after
// row, or column after column under token_order "columns"), the group's patches in row-major order
// side by side: the same encoder without the merge, in rows, gives those features patch by patch.
TEST(VisionLanguageModel, TokensConcatenateEachGroupOfNeighbouringPatchesInTokenOrder) {
  const std::vector<std::pair<int64_t, int64_t>> grids = {{2, 4}, {4, 6}};
  const ImageBatch images = images_of(grids, small_vlm().vision.patch_values());
  Transformer unmerged(small_vlm(1), 1);  // the encoder's weights depend on its names alone
  const at::Tensor patches = encode(encoder_of(unmerged), images);
  ASSERT_EQ(patches.size(0), 8 + 24);
  for (const int merge : {1, 2})
    for (const std::string token_order : {"rows", "columns"}) {
      TransformerConfig c = small_vlm(merge);
      c.vision.token_order = token_order;
      Transformer model(c, 1);
      const at::Tensor tokens = encode(encoder_of(model), images);
      std::vector<int64_t> order;
      int64_t offset = 0;
      for (const auto& [h, w] : grids) {
        auto group = [&, w = w](int64_t r, int64_t col) {
          for (int64_t dr = 0; dr < merge; ++dr)
            for (int64_t dc = 0; dc < merge; ++dc) order.push_back(offset + (r + dr) * w + col + dc);
        };
        if (token_order == "rows") {
          for (int64_t r = 0; r < h; r += merge)
            for (int64_t col = 0; col < w; col += merge) group(r, col);
        } else {
          for (int64_t col = 0; col < w; col += merge)
            for (int64_t r = 0; r < h; r += merge) group(r, col);
        }
        offset += h * w;
      }
      const int64_t per_token = merge * merge;
      ASSERT_EQ(tokens.sizes(), (at::IntArrayRef{32 / per_token, per_token * 16})) << token_order << " merge " << merge;
      const at::Tensor expected = patches.index_select(0, at::tensor(order, at::kLong)).reshape({32 / per_token, per_token * 16});
      EXPECT_TRUE(at::equal(tokens, expected)) << token_order << " merge " << merge;
    }
}

// Attention stays within each image: an image's tokens are what it gives alone, whatever else is in
// the batch (images of one size run as one batched call, others apart). Packed with others, its
// patches go through GEMMs of other row counts, whose blocking may sum in another order: a few ulps.
TEST(VisionLanguageModel, AnImagesTokensDoNotDependOnTheOtherImagesOfTheBatch) {
  const TransformerConfig c = small_vlm();
  Transformer m(c, 1);
  VisionEncoderImpl& encoder = encoder_of(m);
  const int64_t pv = c.vision.patch_values();
  const ImageBatch all = images_of({{2, 4}, {2, 2}, {4, 4}, {4, 4}}, pv);
  const at::Tensor together = encode(encoder, all);
  int64_t patch = 0, token = 0;
  for (int64_t i = 0; i < all.count(); ++i) {
    const int64_t h = all.grids[i][0].item<int64_t>(), w = all.grids[i][1].item<int64_t>();
    ImageBatch alone;
    alone.grids = all.grids.narrow(0, i, 1);
    alone.patches = all.patches.narrow(0, patch, h * w);
    const at::Tensor own = encode(encoder, alone);
    EXPECT_TRUE(at::allclose(together.narrow(0, token, own.size(0)), own, 1e-5, 1e-6)) << "image " << i;
    patch += h * w;
    token += own.size(0);
  }
  // The attention does mix the patches of one image: its other patches change a patch's token.
  ImageBatch changed = all;
  changed.patches = all.patches.clone();
  changed.patches[1].neg_();  // image 0's patch 1, in its first merge group
  const at::Tensor after = encode(encoder, changed);
  EXPECT_FALSE(at::allclose(after[1], together[1]));  // image 0's second group holds no changed patch
  EXPECT_TRUE(at::allclose(after.narrow(0, 2, after.size(0) - 2), together.narrow(0, 2, together.size(0) - 2), 1e-5, 1e-6));
}

TEST(VisionLanguageModel, PlaceholdersTakeTheImageTokensInOrderRowAfterRow) {
  const at::Tensor tokens = at::tensor({5, 9, 5, 5, 1, 5}, at::kLong).view({2, 3});  // placeholder 5 at (0,0), (0,2), (1,0), (1,2)
  const at::Tensor embeddings = at::arange(12, at::kFloat).view({2, 3, 2}).requires_grad_(true);
  const at::Tensor image_tokens = (100 + at::arange(8, at::kFloat)).view({4, 2}).requires_grad_(true);
  const at::Tensor out = place_image_tokens(embeddings, tokens, image_tokens, 5);
  const at::Tensor expected = at::tensor({100, 101, 2, 3, 102, 103, 104, 105, 8, 9, 106, 107}, at::kFloat).view({2, 3, 2});
  EXPECT_TRUE(at::equal(out, expected)) << out;
  out.mul(at::arange(12, at::kFloat).view({2, 3, 2})).sum().backward();
  EXPECT_TRUE(at::equal(image_tokens.grad(), at::tensor({0, 1, 4, 5, 6, 7, 10, 11}, at::kFloat).view({4, 2})));
  EXPECT_TRUE(at::equal(embeddings.grad(), at::tensor({0, 0, 2, 3, 0, 0, 0, 0, 8, 9, 0, 0}, at::kFloat).view({2, 3, 2})));
}

TEST(VisionLanguageModel, PlaceholdersThatDoNotMatchTheImageTokensAreAnError) {
  const TransformerConfig c = small_vlm();
  Transformer m(c, 1);
  const ImageBatch images = images_of({{2, 4}, {2, 2}}, c.vision.patch_values());  // 3 image tokens
  for (const int64_t placeholders : {2, 4}) {
    const std::string e = error_of([&] { m->forward(rows_with({placeholders, 0}, c.seq_len), images); });
    EXPECT_TRUE(contains(e, "hold " + std::to_string(placeholders) + " image placeholder tokens (id 256, model.vision.image_token_id)") &&
                contains(e, "give 3 image tokens"))
        << e;
  }
  const std::string without = error_of([&] { m->forward(rows_with({1, 0}, c.seq_len)); });
  EXPECT_TRUE(contains(without, "hold 1 image placeholder tokens") && contains(without, "give 0 image tokens")) << without;
}

// Every parameter gets a gradient, images or not, in fp32 and in bf16: with images every part's is
// nonzero; without, the vision encoder's and the connector's are zero, computed all the same (every
// layer runs on no patches), and the LLM's are what the text alone gives.
TEST(VisionLanguageModel, GradientsReachEveryPartWithImagesAndArriveAsZerosWithout) {
  const TransformerConfig c = small_vlm();
  for (const at::ScalarType precision : {at::kFloat, at::kBFloat16})
    for (const bool with_images : {true, false}) {
      const std::string what = std::string(precision == at::kFloat ? "fp32" : "bf16") + (with_images ? " with" : " without") + " images";
      Transformer m(c, 1);
      m->set_precision(MixedPrecision::make(precision, at::kCPU));
      const ImageBatch images = with_images ? images_of({{2, 4}, {4, 4}}, c.vision.patch_values()) : ImageBatch{};
      const at::Tensor x = rows_with(with_images ? std::vector<int64_t>{2, 4} : std::vector<int64_t>{0, 0}, c.seq_len);
      next_token_loss(m->forward(x, images), x.roll(-1, 1)).backward();
      for (const auto& item : m->named_parameters()) {
        const std::string& name = item.key();
        ASSERT_TRUE(item.value().grad().defined()) << name << ", " << what;
        const double norm = item.value().grad().norm().item<double>();
        if (with_images || name.rfind("llm.", 0) == 0) {
          EXPECT_GT(norm, 0) << name << ", " << what;
        } else {
          EXPECT_EQ(norm, 0) << name << ", " << what;
        }
      }
    }
}

TEST(VisionLanguageModel, PartsPutTheVisionEncoderAndTheConnectorFirstEachParameterOnce) {
  const TransformerConfig c = small_vlm();
  Transformer m(c, 1);
  std::vector<int> indices;
  std::vector<std::string> listed;
  for (const ForwardPart& part : m->forward_parts()) {
    indices.push_back(part.index);
    for (const auto& [name, t] : part.parameters) {
      listed.push_back(name);
      EXPECT_TRUE(t.is_same(m->named_parameters()[name])) << name;
    }
  }
  // vision stem, 2 blocks, final norm; connector; llm embeddings, 2 blocks, head.
  EXPECT_EQ(indices, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  const std::vector<ForwardPart> parts = m->forward_parts();
  EXPECT_EQ(parts[1].kind, ForwardPart::Kind::Block);
  EXPECT_EQ(parts[1].parameters.front().first, "vision.blocks.0.ln1.weight");
  EXPECT_EQ(parts[4].kind, ForwardPart::Kind::Connector);
  EXPECT_EQ(parts[5].parameters.front().first, "llm.wte.weight");
  EXPECT_EQ(parts[8].borrowed, std::vector<std::string>{"llm.wte.weight"});
  EXPECT_EQ(listed, parameter_names(c));
}

TEST(VisionLanguageModel, IsBuiltWholeAndTextModelsTakeNoImages) {
  const TransformerConfig c = small_vlm();
  EXPECT_THROW(Transformer(c, 1, TransformerParts::stage(0, 1, c.n_layer)), std::invalid_argument);
  TransformerConfig text = model_preset("tiny");
  Transformer m(text, 1);
  const ImageBatch images = images_of({{2, 2}}, 12);
  const std::string e = error_of([&] { m->forward(at::zeros({1, text.seq_len}, at::kLong), images); });
  EXPECT_TRUE(contains(e, "a batch of 1 image(s) for a text model")) << e;
}

// A text model is its embedding, blocks, final norm and head composed, nothing in between: the
// forward pass computes exactly that, bit for bit, images or no ImageBatch at all.
TEST(VisionLanguageModel, ATextModelComputesItsModulesComposedBitForBit) {
  for (const std::string arch : {"gpt2", "llama"}) {
    TransformerConfig c = model_preset("tiny");
    c.arch = arch;
    Transformer m(c, 4);
    const at::Tensor x = at::randint(0, c.vocab_size, {2, c.seq_len}, at::kLong);
    auto modules = m->named_modules("", false);
    at::Tensor h = modules["wte"]->as<EmbeddingImpl>()->forward(x);
    if (arch == "gpt2") h = h + modules["wpe"]->as<EmbeddingImpl>()->weight.narrow(0, 0, c.seq_len);
    at::Tensor cos, sin;
    if (arch == "llama") {
      const int64_t half = c.head_dim() / 2;
      auto opts = at::TensorOptions().dtype(at::kDouble);
      const at::Tensor angles = at::outer(at::arange(0, c.seq_len, opts), at::pow(c.rope_theta, -at::arange(0, half, opts) / double(half)));
      cos = angles.cos().to(at::kFloat);
      sin = angles.sin().to(at::kFloat);
    }
    for (int i = 0; i < c.n_layer; ++i) h = modules["blocks." + std::to_string(i)]->as<BlockImpl>()->forward(h, cos, sin);
    h = modules["ln_f"]->as<NormImpl>()->forward(h);
    const at::Tensor expected = Linear(modules["wte"]->as<EmbeddingImpl>()->weight)->forward(h);  // the tied head
    EXPECT_TRUE(at::equal(m->forward(x), expected)) << arch;
    EXPECT_TRUE(at::equal(m->forward(x, ImageBatch{}), expected)) << arch;
  }
}

TEST(VisionLanguageModelConfig, ValidateNamesTheVisionKeyAtFault) {
  auto message = [](const TransformerConfig& c) { return error_of([&] { c.validate(); }); };
  TransformerConfig c = small_vlm();
  EXPECT_EQ(message(c), "no error");
  c.vocab_size = 257;
  EXPECT_EQ(message(c), "model.vision.end_token_id (257) must be a token of the vocabulary, below model.vocab_size (257)");
  c = small_vlm();
  c.vision.end_token_id = 256;
  EXPECT_EQ(message(c), "model.vision.image_token_id and model.vision.end_token_id must differ, both are 256");
  c = small_vlm();
  c.vision.merge = 3;
  EXPECT_EQ(message(c), "model.vision.merge must be 1 or 2, got 3");
  c = small_vlm();
  c.vision.max_grid = 7;
  EXPECT_EQ(message(c), "model.vision.max_grid (7) must be a multiple of model.vision.merge (2): an image's grid divides by the merge");
  c = small_vlm();
  c.vision.d_model = 15;
  EXPECT_EQ(message(c), "model.vision.d_model (15) must be a positive multiple of model.vision.n_head (2)");
  c = small_vlm();
  c.vision.n_layer = 0;
  EXPECT_EQ(message(c), "model.vision.n_layer must be at least 1, got 0");
  c = small_vlm();
  c.vision.token_order = "diagonal";
  EXPECT_EQ(message(c), "model.vision.token_order must be \"rows\" or \"columns\", got \"diagonal\"");
}

TEST(VisionLanguageModelConfig, RoundTripsThroughJsonAndCountsEveryParameter) {
  TransformerConfig c = small_vlm();
  c.vision.d_ff = 24;
  c.vision.token_order = "columns";
  const TransformerConfig back = transformer_config_from_json(to_json(c));
  EXPECT_EQ(to_json(back), to_json(c));
  EXPECT_EQ(back.vision.ff_dim(), 24);
  EXPECT_TRUE(back.vision.columns_first());
  int64_t counted = 0;
  for (const auto& p : Transformer(c, 1)->parameters()) counted += p.numel();
  EXPECT_EQ(counted, c.parameter_count());
  // A text model's JSON is what it was: no vision key.
  EXPECT_FALSE(to_json(model_preset("tiny")).contains("vision"));
}

TEST(VisionLanguageModelConfig, TheOcrPresetIsASmallLlamaWithAMergingEncoder) {
  const TransformerConfig c = model_preset("vlm-ocr");
  EXPECT_NO_THROW(c.validate());
  EXPECT_TRUE(c.is_vlm() && c.is_llama());
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.vision.merged_dim(), 512);
  EXPECT_EQ(c.describe(),
            "vision 4L/4H d=128 ff=512 patch 8x8x3 grid<=32 merge 2x2, tokens by columns, connector 512->192->192, "
            "llm llama 4L/6H/2KV d=192 ff=512 seq=128 vocab=264 (" +
                std::to_string(c.parameter_count()) + " parameters)");
  // The LLM's FLOPs per token; an image's through the encoder and connector on their own.
  TransformerConfig llm = c;
  llm.arch = "llama";
  EXPECT_EQ(c.train_flops_per_token(), llm.train_flops_per_token());
  EXPECT_GT(c.vision.train_flops_per_image(4, 32, c.d_model), 0);
}
