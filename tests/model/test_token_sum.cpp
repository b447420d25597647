// The sum over tokens that bias gradients use (fused/token_sum.h) against a sequential fp32 sum,
// whose order it states, and against the fp64 sum, in fp32, bf16 and fp16.
#include <gtest/gtest.h>
#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <torch/types.h>

#include <cmath>

#include "model/fused/token_sum.h"

using namespace dtrain;

class SumOverTokensTest : public ::testing::TestWithParam<at::ScalarType> {};

// Each column summed in fp32, token by token in order: the bits of a sequential fp32 loop, on any
// thread count, and within n·2⁻²⁴·Σ|g| of the fp64 sum.
TEST_P(SumOverTokensTest, IsTheSequentialFp32Sum) {
  const at::ScalarType dtype = GetParam();
  // 200 columns: three full blocks of 64 and a part; a [B, T, n] gradient that is not contiguous.
  auto gen = at::make_generator<at::CPUGeneratorImpl>(10);
  const at::Tensor g = (at::randn({200, 4, 300}, gen) + 3).to(dtype).permute({1, 2, 0});
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  const at::Tensor sum = sum_over_tokens_fp32(g);
  at::set_num_threads(1);
  const at::Tensor one = sum_over_tokens_fp32(g);
  at::set_num_threads(threads);
  EXPECT_EQ(sum.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(sum, one));

  const at::Tensor rows = g.reshape({-1, 200}).to(at::kFloat).contiguous();
  at::Tensor sequential = at::zeros({200}, at::kFloat);
  float* s = sequential.data_ptr<float>();
  const float* r = rows.data_ptr<float>();
  for (int64_t i = 0; i < rows.size(0); ++i)
    for (int64_t c = 0; c < 200; ++c) s[c] += r[i * 200 + c];
  EXPECT_TRUE(at::equal(sum, sequential));

  const at::Tensor rows64 = rows.to(at::kDouble);
  const at::Tensor bound = rows64.abs().sum(0) * (rows.size(0) * std::ldexp(1.0, -24));
  EXPECT_TRUE(((sum.to(at::kDouble) - rows64.sum(0)).abs() <= bound).all().item<bool>());
}

INSTANTIATE_TEST_SUITE_P(Types, SumOverTokensTest, ::testing::Values(at::kFloat, at::kBFloat16, at::kHalf),
                         [](const auto& info) { return std::string(info.param == at::kFloat ? "fp32" : info.param == at::kHalf ? "fp16" : "bf16"); });
