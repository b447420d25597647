// parameter_shapes(config) lists what the model holds, computed without building it.
#include <gtest/gtest.h>
#include <torch/types.h>

#include "model/parameter_shapes.h"
#include "model/transformer.h"

using namespace dtrain;

TEST(ParameterShapes, AreTheModelsNamedParametersInOrderForBothArchsTiedAndUntied) {
  for (const char* arch : {"gpt2", "llama"})
    for (const bool tied : {true, false}) {
      TransformerConfig c = model_preset("tiny");
      c.arch = arch;
      c.tie_embeddings = tied;
      c.n_layer = 3;
      if (c.is_llama()) c.n_head = 4, c.n_kv_head = 2;  // grouped-query heads: k and v narrower than q
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
    }
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
