// The model's linear layer: the bias is added after the output reduction, so a row-parallel layer
// (whose reduction all-reduces partial products over its ranks) adds it once.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/types.h>

#include "model/linear.h"

using namespace dtrain;

namespace {

Linear layer_with_bias() {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  Linear layer(8, 3, true);
  at::NoGradGuard no_grad;
  layer->weight.copy_(at::randn({3, 8}, gen));
  layer->bias.copy_(at::tensor({1.0f, 2.0f, 3.0f}));
  return layer;
}

}  // namespace

// A reduction that doubles its input stands for an all-reduce over two ranks holding equal partial
// products: the output is 2·x·Wᵀ + b, and the bias's gradient counts each output once.
TEST(Linear, TheBiasIsAddedOnceAfterTheOutputReduction) {
  for (const at::ScalarType compute : {at::kFloat, at::kBFloat16}) {
    Linear layer = layer_with_bias();
    layer->set_precision(MixedPrecision::make(compute, at::Device(at::kCPU)));
    const at::Tensor x = at::randn({4, 5, 8});
    const at::Tensor plain = layer->forward(x);
    layer->set_output_reduction([](const at::Tensor& partial) { return partial * 2; });
    const at::Tensor reduced = layer->forward(x);
    const at::Tensor product = plain.to(at::kFloat) - layer->bias;  // x·Wᵀ, as the unreduced layer computed it
    // bf16: the plain and reduced outputs are each rounded to 8 bits of mantissa.
    const double rtol = compute == at::kFloat ? 1e-5 : 0.02, atol = compute == at::kFloat ? 1e-5 : 0.1;
    EXPECT_TRUE(at::allclose(reduced.to(at::kFloat), 2 * product + layer->bias, rtol, atol))
        << precision_name(compute) << ": " << (reduced.to(at::kFloat) - (2 * product + layer->bias)).abs().max().item<double>();
    reduced.to(at::kFloat).sum().backward();
    EXPECT_TRUE(at::equal(layer->bias.grad(), at::full({3}, 20.0f))) << precision_name(compute) << ": " << layer->bias.grad();
  }
}

// Without a reduction the layer is x·Wᵀ + b, the bias fused in the GEMM.
TEST(Linear, WithoutAReductionTheLayerIsXWTransposedPlusB) {
  Linear layer = layer_with_bias();
  const at::Tensor x = at::randn({4, 5, 8});
  EXPECT_TRUE(at::allclose(layer->forward(x), at::linear(x, layer->weight, layer->bias), 1e-5, 1e-6));
  layer->set_output_reduction([](const at::Tensor& partial) { return partial; });
  EXPECT_TRUE(at::allclose(layer->forward(x), at::linear(x, layer->weight, layer->bias), 1e-5, 1e-6));
}
