// parameter_shapes(config) lists what the model holds, computed without building it.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "model/parameter_shapes.h"
#include "model/transformer.h"

using namespace dtrain;

TEST(ParameterShapes, AreTheModelsNamedParametersInOrderForEveryArchTiedAndUntied) {
  for (const char* arch : {"gpt2", "llama", "vlm"})
    for (const bool tied : {true, false}) {
      TransformerConfig c = model_preset("tiny");
      c.arch = arch;
      c.tie_embeddings = tied;
      c.n_layer = 3;
      if (c.is_llama()) c.n_head = 4, c.n_kv_head = 2;  // k_proj and v_proj narrower than q_proj
      if (c.is_vlm()) c.vocab_size = 264, c.vision.n_layer = 2, c.vision.d_model = 16, c.vision.max_grid = 4;  // above the reserved ids
      std::vector<std::string> names, expected_names;
      std::vector<std::vector<int64_t>> shapes, expected_shapes;
      for (const auto& p : parameter_shapes(c)) {
        names.push_back(p.name);
        shapes.push_back(p.shape);
      }
      for (const auto& item : Transformer(c, 1)->named_parameters()) {
        expected_names.push_back(item.key());
        expected_shapes.push_back(item.value().sizes().vec());
      }
      EXPECT_EQ(names, expected_names) << arch << (tied ? " tied" : " untied");
      EXPECT_EQ(shapes, expected_shapes) << arch << (tied ? " tied" : " untied");
      EXPECT_EQ(parameter_names(c), expected_names);
    }
}

TEST(ParameterShapes, NameEveryLayerOfABlockAsTheContractSays) {
  TransformerConfig c = model_preset("tiny");
  c.n_layer = 1;
  c.arch = "llama";
  std::vector<std::string> names = parameter_names(c);
  EXPECT_EQ(names, (std::vector<std::string>{"wte.weight", "blocks.0.ln1.weight", "blocks.0.q_proj.weight", "blocks.0.k_proj.weight",
                                             "blocks.0.v_proj.weight", "blocks.0.o_proj.weight", "blocks.0.ln2.weight",
                                             "blocks.0.gate_proj.weight", "blocks.0.up_proj.weight", "blocks.0.down_proj.weight",
                                             "ln_f.weight"}));
}

TEST(ParameterShapes, NameAVisionLanguageModelsPartsAsTheContractSays) {
  TransformerConfig c = model_preset("vlm-ocr");
  c.n_layer = 1;
  c.vision.n_layer = 1;
  std::vector<std::string> names = parameter_names(c);
  EXPECT_EQ(names, (std::vector<std::string>{
                       "vision.patch_embed.weight", "vision.patch_embed.bias", "vision.row_embed.weight", "vision.col_embed.weight",
                       "vision.blocks.0.ln1.weight", "vision.blocks.0.ln1.bias", "vision.blocks.0.q_proj.weight", "vision.blocks.0.q_proj.bias",
                       "vision.blocks.0.k_proj.weight", "vision.blocks.0.k_proj.bias", "vision.blocks.0.v_proj.weight",
                       "vision.blocks.0.v_proj.bias", "vision.blocks.0.o_proj.weight", "vision.blocks.0.o_proj.bias",
                       "vision.blocks.0.ln2.weight", "vision.blocks.0.ln2.bias", "vision.blocks.0.up_proj.weight", "vision.blocks.0.up_proj.bias",
                       "vision.blocks.0.down_proj.weight", "vision.blocks.0.down_proj.bias", "vision.ln_post.weight", "vision.ln_post.bias",
                       "connector.fc1.weight", "connector.fc1.bias", "connector.fc2.weight", "connector.fc2.bias", "llm.wte.weight",
                       "llm.blocks.0.ln1.weight", "llm.blocks.0.q_proj.weight", "llm.blocks.0.k_proj.weight", "llm.blocks.0.v_proj.weight",
                       "llm.blocks.0.o_proj.weight", "llm.blocks.0.ln2.weight", "llm.blocks.0.gate_proj.weight", "llm.blocks.0.up_proj.weight",
                       "llm.blocks.0.down_proj.weight", "llm.ln_f.weight"}));
}

// A 1B-parameter model's shapes, without its 5 GB of weights.
TEST(ParameterShapes, CountThePresetsParametersWithoutBuildingThem) {
  for (const auto& preset : model_preset_names()) {
    const TransformerConfig c = model_preset(preset);
    int64_t n = 0;
    for (const auto& p : parameter_shapes(c)) {
      int64_t elements = 1;
      for (int64_t d : p.shape) elements *= d;
      n += elements;
    }
    EXPECT_EQ(n, c.parameter_count()) << preset;
  }
}
