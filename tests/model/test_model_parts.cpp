// A model holding some of the transformer's parts (a pipeline stage): its parameters keep their
// global names and the whole model's initial values, stages chained compute the whole model's
// logits, and attention computes with the heads its layers hold.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include <set>

#include "model/transformer.h"

using namespace dtrain;

namespace {

TransformerConfig config(const std::string& arch, bool tied) {
  TransformerConfig c = model_preset("tiny");
  c.arch = arch;
  c.n_layer = 5;
  c.tie_embeddings = tied;
  if (arch == "llama") c.n_head = 4, c.n_kv_head = 2;
  return c;
}

at::Tensor tokens(const TransformerConfig& c) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(7);
  return at::randint(c.vocab_size, {2, c.seq_len}, gen, at::kLong);
}

TransformerParts blocks_only(int first, int end) { return TransformerParts::blocks(first, end); }

}  // namespace

// Issue 25: a model built with blocks [2, 4) alone has, bit for bit, the whole model's blocks 2 and 3.
TEST(ModelParts, AModelOfSomeBlocksStartsWithTheWholeModelsWeightsForThem) {
  for (const std::string arch : {"gpt2", "llama"}) {
    const TransformerConfig c = config(arch, true);
    Transformer whole(c, 42), middle(c, 42, blocks_only(2, 4));
    const auto expected = whole->named_parameters();
    std::set<std::string> names;
    for (const auto& item : middle->named_parameters()) {
      names.insert(item.key());
      ASSERT_TRUE(expected.contains(item.key())) << arch << " " << item.key();
      EXPECT_TRUE(at::equal(item.value(), expected[item.key()])) << arch << " " << item.key();
    }
    std::set<std::string> blocks_2_and_3;
    for (const auto& item : expected)
      if (item.key().rfind("blocks.2.", 0) == 0 || item.key().rfind("blocks.3.", 0) == 0) blocks_2_and_3.insert(item.key());
    EXPECT_EQ(names, blocks_2_and_3) << arch;
  }
}

// A model of [embedding + blocks 0..k) and one of [blocks k..n + head], chained, give the whole
// model's logits bit for bit, for either arch with the head tied or not (a tied head without the
// embedding brings the embedding's weight along, under the same name and values).
TEST(ModelParts, TwoStagesChainedGiveTheWholeModelsLogitsBitForBit) {
  for (const std::string arch : {"gpt2", "llama"})
    for (const bool tied : {true, false}) {
      const TransformerConfig c = config(arch, tied);
      Transformer whole(c, 9);
      for (const int k : {1, 3}) {
        Transformer first(c, 9, TransformerParts::stage(0, k, c.n_layer)), last(c, 9, TransformerParts::stage(k, c.n_layer, c.n_layer));
        const at::Tensor x = tokens(c);
        const at::Tensor hidden = first->forward(x);
        EXPECT_EQ(hidden.sizes(), (std::vector<int64_t>{2, c.seq_len, c.d_model}));
        EXPECT_TRUE(at::equal(last->forward(hidden), whole->forward(x))) << arch << (tied ? " tied" : " untied") << " split at " << k;
        EXPECT_EQ(last->named_parameters().contains("wte.weight"), tied) << arch;
      }
    }
}

// Interleaved stages: two models of two chunks each ([0,1) and [2,3) with the embedding, [1,2) and
// [3,5) with the head), their chunks run in turn, give the whole model's logits bit for bit; a model
// of several chunks refuses forward(), which would not know where one chunk ends.
TEST(ModelParts, ChunksRunInTurnGiveTheWholeModelsLogitsBitForBit) {
  for (const bool tied : {true, false}) {
    const TransformerConfig c = config("llama", tied);
    ASSERT_EQ(c.n_layer, 5);
    Transformer whole(c, 9), even(c, 9, TransformerParts::stages({{0, 1}, {2, 3}}, c.n_layer)),
        odd(c, 9, TransformerParts::stages({{1, 2}, {3, 5}}, c.n_layer));
    EXPECT_TRUE(even->parts().embedding && !even->parts().head && odd->parts().head && !odd->parts().embedding);
    const at::Tensor x = tokens(c);
    const at::Tensor out = odd->forward_chunk(1, even->forward_chunk(1, odd->forward_chunk(0, even->forward_chunk(0, x))));
    EXPECT_TRUE(at::equal(out, whole->forward(x))) << (tied ? "tied" : "untied");
    EXPECT_THROW(even->forward(x), c10::Error);
  }
  EXPECT_THROW(TransformerParts::stages({{2, 3}, {0, 1}}, 4).validate(4), std::invalid_argument);
}

TEST(ModelParts, ForwardNamesWhatAStageTakes) {
  const TransformerConfig c = config("gpt2", true);
  Transformer middle(c, 1, blocks_only(1, 2)), whole(c, 1);
  try {
    middle->forward(tokens(c));
    FAIL() << "tokens were taken for hidden states";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("a chunk without the embedding takes hidden states [batch, T, 32]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(whole->forward(at::zeros({2, 4, c.d_model})), c10::Error);
  EXPECT_THROW(Transformer(c, 1, blocks_only(3, 2)), std::invalid_argument);
  EXPECT_THROW(Transformer(c, 1, blocks_only(1, 1)), std::invalid_argument);  // holds nothing
  EXPECT_THROW(Transformer(c, 1, blocks_only(0, c.n_layer + 1)), std::invalid_argument);
}

// ZeRO's units come from this list: every parameter in exactly one part, parts in forward order
// with their global indices, a tied head's weight owned by the embeddings when the model holds them.
TEST(ModelParts, TheModelListsItsPartsWithEveryParameterOnce) {
  for (const bool tied : {true, false}) {
    const TransformerConfig c = config("gpt2", tied);
    for (const TransformerParts& parts : {TransformerParts{}, TransformerParts::stage(2, c.n_layer, c.n_layer), blocks_only(1, 3)}) {
      Transformer m(c, 1, parts);
      std::vector<std::string> listed, expected;
      std::vector<int> indices, expected_indices;
      for (const auto& part : m->forward_parts()) {
        indices.push_back(part.index);
        for (const auto& [name, t] : part.parameters) {
          listed.push_back(name);
          EXPECT_TRUE(t.is_same(m->named_parameters()[name])) << name;
          const bool in_block = name.rfind("blocks.", 0) == 0;
          EXPECT_EQ(part.kind == ForwardPart::Kind::Block, in_block) << name;
          if (in_block) {
            EXPECT_EQ(part.index, std::stoi(name.substr(7)) + 1) << name;
          }
        }
      }
      for (const auto& item : m->named_parameters()) expected.push_back(item.key());
      std::sort(listed.begin(), listed.end());
      std::sort(expected.begin(), expected.end());
      EXPECT_EQ(listed, expected);
      if (m->parts().embedding) expected_indices.push_back(0);
      for (int i : m->parts().block_indices(c.n_layer)) expected_indices.push_back(i + 1);
      if (m->parts().head) expected_indices.push_back(c.n_layer + 1);
      EXPECT_EQ(indices, expected_indices);
    }
  }
}

// Attention counts its heads from its projections: a block whose q/k/v rows and o_proj columns hold
// half the heads computes that half's share of the attention output, and the two halves add up to
// the whole block's (the MLP is zeroed, so a block's output is x + attention).
TEST(ModelParts, AttentionTakesItsHeadCountsFromItsLayers) {
  TransformerConfig c = config("llama", true);  // 4 query heads over 2 key/value heads, no biases
  Transformer whole(c, 3, blocks_only(0, 1));
  Block block(c);
  at::NoGradGuard no_grad;
  for (const auto& item : whole->named_parameters()) block->named_parameters()[item.key().substr(9)].copy_(item.value());
  block->down_proj->weight.zero_();
  auto half = [&](int h) {
    Block b(c);
    for (const auto& item : block->named_parameters()) b->named_parameters()[item.key()].copy_(item.value());
    const int64_t hd = c.head_dim(), q = c.n_head / 2 * hd, kv = c.kv_heads() / 2 * hd;
    auto rows = [&](Linear& layer, const std::string& name, int64_t n) {
      Linear sliced(layer->in_features(), n, false);
      sliced->weight.copy_(layer->weight.narrow(0, h * n, n));
      layer = b->replace_module(name, sliced);
    };
    rows(b->q_proj, "q_proj", q);
    rows(b->k_proj, "k_proj", kv);
    rows(b->v_proj, "v_proj", kv);
    Linear o(q, c.d_model, false);
    o->weight.copy_(b->o_proj->weight.narrow(1, h * q, q));
    b->o_proj = b->replace_module("o_proj", o);
    return b;
  };
  const at::Tensor x = at::randn({2, c.seq_len, c.d_model});
  // RoPE's tables, as the model builds them.
  const int64_t halfd = c.head_dim() / 2;
  auto opts = at::TensorOptions().dtype(at::kDouble);
  auto angles = at::outer(at::arange(0, c.seq_len, opts), at::pow(c.rope_theta, -at::arange(0, halfd, opts) / double(halfd)));
  const at::Tensor cos = angles.cos().to(at::kFloat), sin = angles.sin().to(at::kFloat);
  const at::Tensor full = block->forward(x, cos, sin) - x;
  const at::Tensor sum = (half(0)->forward(x, cos, sin) - x) + (half(1)->forward(x, cos, sin) - x);
  EXPECT_TRUE(at::allclose(sum, full, 1e-5, 1e-6)) << (sum - full).abs().max().item<double>();
}
